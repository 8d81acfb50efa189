"""RecentPeak: the largest value of the last one to two windows."""

from __future__ import annotations

import pytest

from tidings.core.peaks import RecentPeak

# (notes as (value, at), asked at, expected peak), window 5 s
CASES = [
    ([], 0.0, 0.0),
    ([(2.0, 0.0)], 0.0, 2.0),
    ([(2.0, 0.0), (1.0, 1.0)], 1.0, 2.0),  # the largest, not the last
    ([(2.0, 0.0)], 4.9, 2.0),  # same window
    ([(2.0, 0.0)], 9.9, 2.0),  # the window before
    ([(2.0, 0.0)], 10.0, 0.0),  # two windows on: gone
    ([(2.0, 0.0), (1.0, 6.0)], 10.5, 1.0),  # the older one went with its window
    ([(2.0, 0.0), (3.0, 7.0)], 7.0, 3.0),
    ([(2.0, 0.0)], 100.0, 0.0),  # long quiet
    ([(2.0, 0.0), (0.5, 100.0)], 100.0, 0.5),  # then a small one alone
]


@pytest.mark.parametrize(("notes", "at", "expected"), CASES)
def test_peak(notes: list[tuple[float, float]], at: float, expected: float) -> None:
    peak = RecentPeak(5.0)
    for noted, when in notes:
        peak.note(noted, when)
    assert peak.peak(at) == expected


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window must be positive, got 0"):
        RecentPeak(0)
