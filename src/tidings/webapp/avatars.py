"""Avatars drawn here, from a user's id: no image service, no external fetch.

A 5x5 grid mirrored left to right (an identicon), its cells and hue taken
from a SHA-256 of the id, so the same user has the same picture everywhere
and two users rarely look alike.
"""

from __future__ import annotations

import hashlib

#: Cells across (and down); the middle column is its own mirror.
GRID = 5
_HALF = (GRID + 1) // 2


def avatar_svg(seed: str) -> str:
    """The avatar of ``seed`` (a user id) as an SVG document."""
    digest = hashlib.sha256(seed.encode()).digest()
    hue = int.from_bytes(digest[:2], "big") % 360
    cells: list[tuple[int, int]] = []
    for row in range(GRID):
        for col in range(_HALF):
            if digest[2 + row * _HALF + col] & 1:
                cells.append((col, row))
                if col != GRID - 1 - col:
                    cells.append((GRID - 1 - col, row))
    if not cells:  # an empty grid reads as a missing picture: fill the middle
        cells.append((GRID // 2, GRID // 2))
    rects = "".join(f'<rect x="{x}" y="{y}" width="1" height="1"/>' for x, y in sorted(cells))
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="-0.5 -0.5 6 6" '
        'shape-rendering="crispEdges">'
        f'<rect x="-0.5" y="-0.5" width="6" height="6" fill="hsl({hue} 60% 93%)"/>'
        f'<g fill="hsl({hue} 55% 38%)">{rects}</g></svg>'
    )
