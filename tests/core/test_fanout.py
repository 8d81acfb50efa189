"""The fan-out strategy core: classification with hysteresis, the read-time merge,
and what a source going back to push copies into its followers."""

from __future__ import annotations

import pytest

from tidings.core.fanout import Strategy, backfill_plan, classify, merge_newest


@pytest.mark.parametrize(
    ("current", "followers", "expected"),
    [
        ("push", 0, "push"),
        ("push", 100, "push"),  # at the threshold: still pushed
        ("push", 101, "pull"),
        ("pull", 101, "pull"),
        ("pull", 100, "pull"),
        ("pull", 91, "pull"),  # inside the hysteresis band: stays
        ("pull", 90, "pull"),  # at the lower edge: stays
        ("pull", 89, "push"),
        ("pull", 0, "push"),
        ("push", 95, "push"),  # a pushed source in the band stays pushed
        ("draining", 95, "push"),  # draining is on its way to push
        ("draining", 0, "push"),
        ("draining", 101, "pull"),
    ],
)
def test_classify_with_hysteresis(current: Strategy, followers: int, expected: str) -> None:
    assert classify(current, followers, threshold=100, hysteresis=0.1) == expected


@pytest.mark.parametrize(
    ("current", "followers", "threshold", "hysteresis", "expected"),
    [
        ("push", 1, 0, 0.5, "pull"),  # threshold 0: any follower pulls
        ("push", 0, 0, 0.5, "push"),
        ("pull", 0, 0, 0.5, "pull"),  # never below 0: once pulled, stays
        ("pull", 4, 5, 0.0, "push"),  # no hysteresis: back below the threshold
        ("pull", 5, 5, 0.0, "pull"),
    ],
)
def test_classify_edges(
    current: Strategy, followers: int, threshold: int, hysteresis: float, expected: str
) -> None:
    assert classify(current, followers, threshold, hysteresis) == expected


@pytest.mark.parametrize(
    ("lists", "limit", "expected"),
    [
        ([], 3, []),
        ([[], []], 3, []),
        ([["9", "5", "1"]], 2, ["9", "5"]),
        ([["9", "5", "1"], ["8", "4"]], 10, ["9", "8", "5", "4", "1"]),
        ([["9", "5", "1"], ["8", "4"]], 3, ["9", "8", "5"]),
        # An id in several lists (pushed before the switch, and pulled) once.
        ([["9", "5", "1"], ["9", "7", "5"], ["5"]], 10, ["9", "7", "5", "1"]),
        ([["3"], ["3"], ["3"]], 2, ["3"]),
        ([["9", "5"]], 0, []),
        # Ids sort as text (same-millisecond ids differ in their low digits).
        (
            [["01a", "019"], ["01b", "018"]],
            3,
            ["01b", "01a", "019"],
        ),
    ],
)
def test_merge_newest(lists: list[list[str]], limit: int, expected: list[str]) -> None:
    assert merge_newest(lists, limit) == expected


@pytest.mark.parametrize(
    ("newest", "followers", "expected"),
    [
        (["9", "7", "5"], [], []),
        ([], [("t:a", "")], []),
        # Followed long ago: everything; the follow began at 6: 9 and 7 only.
        (
            ["9", "7", "5"],
            [("t:a", ""), ("t:b", "6"), ("t:c", "0"), ("t:d", "7")],
            [(["9", "7", "5"], ["t:a", "t:c"]), (["9", "7"], ["t:b", "t:d"])],
        ),
        # A follow newer than every id gets nothing.
        (["9", "7"], [("t:a", "a")], []),
    ],
)
def test_backfill_plan(
    newest: list[str],
    followers: list[tuple[str, str]],
    expected: list[tuple[list[str], list[str]]],
) -> None:
    assert backfill_plan(newest, followers) == expected
