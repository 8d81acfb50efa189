"""Changes to an activity's ``extra`` named by dotted paths (``"product.price"``
is the ``price`` key of the object under ``product``): pure functions.

A path's parts are keys of nested objects; setting one creates the objects
missing on the way, and refuses to go through a value that is not an object
(that would drop it). Unsetting a path that is not there changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from tidings.core.errors import ValidationError

#: Levels a path may go down: deeper than any payload tidings accepts is nesting.
MAX_PATH_PARTS = 10


def split(path: object, field: str) -> list[str]:
    """The keys along ``path``; every part non-empty."""
    if not isinstance(path, str):
        raise ValidationError(f"a path must be a string, got {type(path).__name__}", field=field)
    parts = path.split(".")
    if not all(parts):
        raise ValidationError(f"{path[:64]!r} has an empty part", field=field)
    if len(parts) > MAX_PATH_PARTS:
        raise ValidationError(
            f"{path[:64]!r} has {len(parts)} parts; the limit is {MAX_PATH_PARTS}", field=field
        )
    return parts


def apply(extra: Mapping[str, Any], set: Mapping[str, Any], unset: Sequence[str]) -> dict[str, Any]:
    """``extra`` with the paths of ``unset`` removed, then those of ``set`` set
    (a new dict: ``extra`` is left as it was)."""
    out = copy.deepcopy(dict(extra))
    for path in unset:
        *parents, last = split(path, "unset")
        node: Any = out
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    for path, value in set.items():
        *parents, last = split(path, "set")
        node = out
        for depth, key in enumerate(parents):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                walked = ".".join(parents[: depth + 1])
                raise ValidationError(
                    f"{path[:64]!r} goes through {walked!r}, which is not an object",
                    field="set",
                )
            node = child
        node[last] = copy.deepcopy(value)
    return out
