"""The maths both evaluators share: the range every number is kept within,
the coercion of values and ``^``.

Two more things live here because they share the decay maths: the decay
functions themselves (plain functions, usable on their own) and
:func:`recency_score`, the score an activity gets at write time.
"""

from __future__ import annotations

import math
from typing import Final

from tidings.core.errors import ValidationError

#: Every intermediate result lies within ±LIMIT; overflow is clamped to it.
LIMIT: Final = 1e300

_LN_LIMIT: Final = math.log(LIMIT)
_LN2: Final = math.log(2.0)
_MS_PER_HOUR: Final = 3_600_000.0


# -- within range -------------------------------------------------------------
#
# Shared by the closures of scalar.py and columns.py.


def _clamp(r: float) -> float:
    """``r`` brought back within ±LIMIT (NaN becomes 0.0)."""
    if -LIMIT <= r <= LIMIT:
        return r
    if r > 0.0:
        return LIMIT
    return -LIMIT if r < 0.0 else 0.0


def _coerce(x: object, default: float) -> float:
    """A value that is not a plain number within range, made one."""
    if x is None or isinstance(x, str | bytes):
        return default
    try:
        number = float(x)  # type: ignore[arg-type]  # anything float() takes
    except OverflowError:  # an int beyond any float
        return LIMIT if x > 0 else -LIMIT  # type: ignore[operator]
    except (TypeError, ValueError):
        return default
    return _clamp(number)


def _power(a: float, b: float) -> float:
    """``a ** b``, total: overflow clamps to ±LIMIT, a complex result or 0 to a
    negative power gives 0.0."""
    try:
        r = math.pow(a, b)
    except ValueError:
        return 0.0
    except OverflowError:
        # Only a negative base to an odd integer power overflows downwards.
        return -LIMIT if a < 0.0 and b % 2.0 == 1.0 else LIMIT
    return r if -LIMIT <= r <= LIMIT else _clamp(r)


# -- plain functions ----------------------------------------------------------
#
# The decay functions follow Elasticsearch's: 1 while x <= offset, exactly
# `decay` at x = offset + scale, falling towards 0 after. Here x is already a
# distance (an age, say), so x below the offset (a clock running a little
# fast) simply scores 1. They are total too: a non-positive scale gives 0, a
# decay outside [0, 1] is clamped into it (a NaN decay counts as 0), and a NaN
# x or scale gives 0.


def _clamp_decay(decay: float) -> float:
    """``decay`` when within [0, 1], else the nearer end (NaN: 0)."""
    if 0.0 <= decay <= 1.0:
        return decay
    return 1.0 if decay > 1.0 else 0.0


def decay_exp(x: float, scale: float, offset: float = 0.0, decay: float = 0.5) -> float:
    """``decay ** ((x - offset) / scale)`` past the offset, 1 before it."""
    if not scale > 0.0:
        return 0.0
    distance = x - offset
    if not distance > 0.0:
        return 1.0 if distance <= 0.0 else 0.0  # the else is NaN
    return math.pow(_clamp_decay(decay), distance / scale)


def decay_linear(x: float, scale: float, offset: float = 0.0, decay: float = 0.5) -> float:
    """``1 - (1 - decay) * (x - offset) / scale`` past the offset, never below 0."""
    if not scale > 0.0:
        return 0.0
    distance = x - offset
    if not distance > 0.0:
        return 1.0 if distance <= 0.0 else 0.0
    decay = _clamp_decay(decay)
    if decay == 1.0:  # no decay at all; also keeps 0 * inf (a NaN) out
        return 1.0
    return max(0.0, 1.0 - (1.0 - decay) * (distance / scale))


def decay_gauss(x: float, scale: float, offset: float = 0.0, decay: float = 0.5) -> float:
    """``decay ** (((x - offset) / scale) ** 2)`` past the offset, 1 before it."""
    if not scale > 0.0:
        return 0.0
    distance = x - offset
    if not distance > 0.0:
        return 1.0 if distance <= 0.0 else 0.0
    ratio = distance / scale
    # ratio * ratio may overflow to inf, and pow(decay, inf) is 0 (or 1): fine.
    return math.pow(_clamp_decay(decay), ratio * ratio)


def recency_score(time_ms: int, half_life_hours: float = 24.0) -> float:
    """The score an activity gets at write time: its time, in half-lives, times ln 2.

    A stored score must never need re-scoring, and a score that decays with
    age would: every stored score would change as the clock moves. The
    trick of Reddit's "hot" score is to grow new items instead of decaying
    old ones, in log space. This is that score with no engagement term: the
    natural log of ``2 ** (time / half_life)``. So the order it gives is
    exactly the order of time (it is ``time_ms`` times a positive constant,
    and stays exact to the millisecond for any real timestamp), and one
    half-life newer is worth ``ln 2`` more, the same as twice the
    engagement, should a caller ever add ``ln(engagement)`` to it.

    Reads that want the full formula (likes, affinity, decay by age at the
    time of the read) fetch candidates in this order and score them with a
    :class:`Scorer`.
    """
    if not half_life_hours > 0.0 or math.isinf(half_life_hours):
        raise ValidationError("half_life_hours must be a positive number", field="ranking")
    return time_ms * _LN2 / (half_life_hours * _MS_PER_HOUR)
