"""A ranked feed's frozen order: packing, and the author-diversity rule."""

from __future__ import annotations

import pytest

from tidings.core import ids
from tidings.core.snapshot import Snapshot, SnapshotFormatError, diversify


def _ids(n: int) -> list[str]:
    return [ids.encode(i.to_bytes(16, "big")) for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 1000])
@pytest.mark.parametrize("excluded", [0, 3])
def test_a_snapshot_packs_and_unpacks(n: int, excluded: int) -> None:
    made = Snapshot(
        feed="ranked:alice",
        ids=_ids(n),
        scores=[float(i) / 3 for i in range(n)],
        expires_ms=1_700_000_000_000,
        excluded=_ids(excluded),
    )
    packed = made.pack()
    assert Snapshot.unpack(packed) == made
    # 16 bytes an id and 8 a score, plus a small header.
    assert len(packed) - 24 * n - 16 * excluded < 128


@pytest.mark.parametrize(
    "raw", [b"", b"\x00\x00\x00\x05{}", b"\x00\x00\x00\x02{}", b"\x00\x00\x00\x09" + b"x" * 9]
)
def test_damaged_snapshots_are_refused(raw: bytes) -> None:
    with pytest.raises(SnapshotFormatError):
        Snapshot.unpack(raw)


def test_a_truncated_snapshot_is_refused() -> None:
    packed = Snapshot("ranked:a", _ids(3), [1.0, 2.0, 3.0], 1, []).pack()
    with pytest.raises(SnapshotFormatError, match="truncated"):
        Snapshot.unpack(packed[:-8])


def test_one_score_per_id() -> None:
    with pytest.raises(ValueError, match="one score per id"):
        Snapshot("ranked:a", _ids(2), [1.0], 1, []).pack()


#: (actors best first, page size, per actor, expected order of positions)
DIVERSITY = [
    ("no rule", "aaab", 2, None, [0, 1, 2, 3]),
    ("rule looser than a page", "aaab", 2, 2, [0, 1, 2, 3]),
    ("one per actor", "aabc", 2, 1, [0, 2, 1, 3]),
    ("deferred keep their rank", "aaabbc", 3, 1, [0, 3, 5, 1, 2, 4]),
    ("two per actor", "aaaabc", 3, 2, [0, 1, 4, 2, 3, 5]),
    ("one actor left fills pages", "aaaa", 2, 1, [0, 1, 2, 3]),
    ("fill after others run out", "abaa", 3, 1, [0, 1, 2, 3]),
    ("empty", "", 5, 1, []),
]


@pytest.mark.parametrize(
    ("actors", "size", "per_actor", "expected"),
    [c[1:] for c in DIVERSITY],
    ids=[c[0] for c in DIVERSITY],
)
def test_diversify(actors: str, size: int, per_actor: int | None, expected: list[int]) -> None:
    order = diversify(list(actors), size, per_actor)
    assert order == expected
    assert sorted(order) == list(range(len(actors)))  # nothing dropped or repeated
