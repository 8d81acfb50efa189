"""Avatars drawn from user ids: the same id, the same picture; mirrored; SVG."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest

from tidings.webapp.avatars import GRID, avatar_svg

SVG = "{http://www.w3.org/2000/svg}"


def cells(svg: str) -> set[tuple[int, int]]:
    root = ElementTree.fromstring(svg)
    group = root.find(f"{SVG}g")
    assert group is not None
    return {(int(r.attrib["x"]), int(r.attrib["y"])) for r in group.iter(f"{SVG}rect")}


@pytest.mark.parametrize(
    "seed", ["alice", "bob", "u0001", "u0002", "ünïcode", "a" * 255, "x.y@z=+-", ""]
)
def test_an_avatar_is_a_mirrored_grid_in_one_hue(seed: str) -> None:
    svg = avatar_svg(seed)
    drawn = cells(svg)
    assert drawn, "never empty"
    assert all(0 <= x < GRID and 0 <= y < GRID for x, y in drawn)
    assert drawn == {(GRID - 1 - x, y) for x, y in drawn}, "mirrored left to right"
    hues = set(re.findall(r"hsl\((\d+) ", svg))
    assert len(hues) == 1, "background and cells share one hue"
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", ""), "nothing fetched"


@pytest.mark.parametrize(("a", "b"), [("alice", "alice"), ("u0001", "u0001")])
def test_the_same_id_gives_the_same_avatar(a: str, b: str) -> None:
    assert avatar_svg(a) == avatar_svg(b)


def test_different_ids_rarely_look_alike() -> None:
    drawn = {avatar_svg(f"u{n:04d}") for n in range(500)}
    assert len(drawn) >= 495
