"""What reads return: a page of results and the cursor to the next one; a follow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    results: list[T] = field(default_factory=list)
    #: Opaque cursor for the next page; None on the last page.
    next: str | None = None
    #: The feed is being rebuilt after its owner was idle: this page came from
    #: the canonical store (complete, but slower to make). Over HTTP: 206.
    regenerating: bool = False


@dataclass(frozen=True, slots=True)
class Follow:
    follower: str
    source: str
    created_ms: int
