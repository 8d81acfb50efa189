"""A ranked feed's frozen order: what its first page stores so that the pages
after it come out of one ranking, whatever the scores do meanwhile.

A snapshot is the ranked ids with their scores, the feed it ranks, when it
stops serving pages, and the ids that pages before it served (a snapshot
made when an older one expired leaves those out). Packed compactly: 16
bytes an id and 8 a score, so 1,000 candidates take 24 KB.

The author-diversity rule (at most N activities of one actor per page) is
applied while the order is made, for pages of the first page's size.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from tidings.core import ids

_HEADER_LENGTH = struct.Struct(">I")
_ID_BYTES = 16
_VERSION = 1


class SnapshotFormatError(ValueError):
    """Stored bytes that are not a snapshot this version wrote."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    feed: str
    #: Ids, best first, and their scores at the time of the first page.
    ids: list[str]
    scores: list[float]
    #: When it stops serving pages (ms): the next page then ranks afresh,
    #: leaving out what was served.
    expires_ms: int
    #: Ids served by the pages before this snapshot was made.
    excluded: list[str]

    def pack(self) -> bytes:
        header = orjson.dumps(
            {
                "v": _VERSION,
                "feed": self.feed,
                "n": len(self.ids),
                "x": len(self.excluded),
                "expires_ms": self.expires_ms,
            }
        )
        scores = array("d", self.scores)
        if len(scores) != len(self.ids):
            raise ValueError("a snapshot needs one score per id")
        return b"".join(
            (
                _HEADER_LENGTH.pack(len(header)),
                header,
                bytes.fromhex("".join(self.ids)),
                scores.tobytes(),
                bytes.fromhex("".join(self.excluded)),
            )
        )

    @classmethod
    def unpack(cls, raw: bytes) -> Snapshot:
        try:
            (length,) = _HEADER_LENGTH.unpack_from(raw)
            header = orjson.loads(raw[4 : 4 + length])
            if header["v"] != _VERSION:
                raise SnapshotFormatError(f"snapshot version {header['v']}")
            n, x = int(header["n"]), int(header["x"])
            at = 4 + length
            id_bytes = raw[at : at + n * _ID_BYTES]
            at += n * _ID_BYTES
            scores = array("d")
            scores.frombytes(raw[at : at + n * 8])
            at += n * 8
            excluded = raw[at : at + x * _ID_BYTES]
        except (struct.error, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise SnapshotFormatError(f"not a snapshot: {exc}") from None
        if len(id_bytes) != n * _ID_BYTES or len(scores) != n or len(excluded) != x * _ID_BYTES:
            raise SnapshotFormatError("snapshot is truncated")
        return cls(
            feed=str(header["feed"]),
            ids=ids.encode_many(id_bytes),
            scores=scores.tolist(),
            expires_ms=int(header["expires_ms"]),
            excluded=ids.encode_many(excluded),
        )


def diversify(actors: Sequence[str], page_size: int, per_actor: int | None) -> list[int]:
    """The positions ``0..len(actors)-1`` (best first) reordered so that no page
    of ``page_size`` holds more than ``per_actor`` of one actor.

    An activity over its actor's share moves to the next page that has room
    for it, ahead of worse-ranked ones there; nothing is dropped. When only
    one actor's activities remain, pages hold ``per_actor`` of them (short
    pages would read as the end of the feed, so they are filled instead).
    """
    order = list(range(len(actors)))
    if per_actor is None or per_actor >= page_size:
        return order
    out: list[int] = []
    pending = order
    while pending:
        taken: dict[str, int] = {}
        page: list[int] = []
        deferred: list[int] = []
        rest = 0
        for rest, i in enumerate(pending):  # noqa: B007 - rest is read after the loop
            if len(page) == page_size:
                break
            actor = actors[i]
            if taken.get(actor, 0) < per_actor:
                taken[actor] = taken.get(actor, 0) + 1
                page.append(i)
            else:
                deferred.append(i)
        else:
            rest = len(pending)
        if len(page) < page_size and deferred:
            # Nothing else is left to fill the page: fill it in rank order.
            fill = deferred[: page_size - len(page)]
            page = sorted(page + fill)
            deferred = deferred[len(fill) :]
        out += page
        # Deferred positions are all better than those not yet looked at.
        pending = deferred + pending[rest:]
    return out
