"""The tree a ranking expression parses to: frozen nodes, each knowing its height."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

# -- the tree -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Num:
    value: float
    height: int = 1


@dataclass(frozen=True, slots=True)
class _Var:
    name: str
    height: int = 1


@dataclass(frozen=True, slots=True)
class _VerbRef:
    """``verb`` as the argument of ``weight``, the only place it may stand."""

    pos: int
    height: int = 1


@dataclass(frozen=True, slots=True)
class _Op:
    """An operator; ``neg`` and ``not`` have one argument, the rest two."""

    op: str
    args: tuple[_Node, ...]
    height: int


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    args: tuple[_Node, ...]
    height: int


_Node: TypeAlias = _Num | _Var | _VerbRef | _Op | _Call


def _walk(node: _Node) -> list[_Node]:
    found: list[_Node] = [node]
    if isinstance(node, _Op | _Call):
        for arg in node.args:
            found += _walk(arg)
    return found
