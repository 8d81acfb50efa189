"""Rows the canonical store hands to runners (outbox rows, follow copies, parts
and regenerations, decoded from stored rows), and helpers every section shares."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from tidings.core.activity import Activity
from tidings.core.aggregation import ms_time
from tidings.core.fanout import OutboxKind
from tidings.core.readers import PartTier

# SQLite allows 32,766 bound parameters per statement; stay well under.
IN_CHUNK = 5000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    kind: OutboxKind  # DELIVER or RETRACT
    activity: Activity  # aggregated feeds need its fields, even once it is deleted
    source: str
    targets: tuple[str, ...]
    position: str | None
    #: {feed group: group key}, as fixed at publish.
    aggregate_keys: Mapping[str, str]
    #: The claim this copy of the row was read under (0: not claimed).
    token: int = 0

    @property
    def activity_id(self) -> str:
        return self.activity.id


@dataclass(frozen=True, slots=True)
class CopyRow:
    """An outbox row of kind COPY: follows created in one transaction, each to
    be given its source's newest ``limit`` activities down to where the
    follow's history starts and up to the newest id recorded with it."""

    id: int
    token: int
    limit: int
    #: ``(follower, source, newest id to copy)``, sorted.
    follows: tuple[tuple[str, str, str], ...]
    #: How many of ``follows`` are done.
    done: int


#: What a runner claims.
Claimed = OutboxRow | CopyRow


@dataclass(frozen=True, slots=True)
class Part:
    """The followers of ``tier`` of an outbox row's source after ``after`` up to
    ``last`` (inclusive; None: to the end), carried out by one distributed task.

    ``tier`` is HIGH or LOW (ALL: split before tiers existed);
    ``split_ms`` is when the row was split (as recorded; 0 in a task's copy).
    """

    row_id: int
    after: str
    last: str | None
    tier: PartTier = PartTier.ALL
    split_ms: int = 0


@dataclass(frozen=True, slots=True)
class Regeneration:
    """A feed to rebuild from the canonical store; ``token`` names the request
    (a newer request for the same feed supersedes it)."""

    feed: str
    token: int


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def stored_keys(raw: bytes | None) -> dict[str, str]:
    # Rows written before schema v2 have none: keys are then rendered anew.
    return {} if raw is None else dict(orjson.loads(raw))


def new_token() -> int:
    # Random rather than counted: unique without reading the row first.
    return secrets.randbits(63)


def part_of(r: Any) -> Part:
    return Part(r.row_id, r.after, r.last, PartTier(r.tier), int(r.split_ms))


def claimed_of(r: Any, doc: bytes | None, token: int) -> Claimed:
    if r.kind == OutboxKind.COPY:
        spec = orjson.loads(r.targets)
        follows = tuple((f, s, newest) for f, s, newest in spec["follows"])
        return CopyRow(r.id, token, int(spec["limit"]), follows, int(r.position or 0))
    return outbox_row_of(r, doc, token)


def outbox_row_of(r: Any, doc: bytes | None, token: int = 0) -> OutboxRow:
    return OutboxRow(
        id=r.id,
        kind=OutboxKind(r.kind),
        activity=outbox_activity(r.activity_id, doc),
        source=r.source,
        targets=tuple(orjson.loads(r.targets)),
        position=r.position,
        aggregate_keys=stored_keys(r.group_keys),
        token=token,
    )


def outbox_activity(activity_id: str, doc: bytes | None) -> Activity:
    if doc is not None:
        return Activity.from_json(doc)
    # A pre-v2 retraction of an activity already deleted: its id is all that
    # is left, which is all flat feeds need.
    return Activity(activity_id, "", "", "", ms_time(activity_id))
