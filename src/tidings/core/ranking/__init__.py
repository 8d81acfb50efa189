"""Ranking expressions: a small, safe formula language for ranked feeds.

A ranked feed orders its candidates by a formula such as::

    decay_exp(age_hours, 24) * (1 + ln(1 + likes + 2*comments)) * weight(verb) * (1 + affinity)

The text comes from configuration, so it is never handed to ``eval``: a
hand-written tokenizer and a precedence-climbing (Pratt) parser turn it into a
tree once, at start-up (:meth:`RankingExpression.parse`), and
:meth:`RankingExpression.compile` turns the tree into nested Python closures,
one specialised closure per node, with constant sub-expressions folded. A
page read scores up to a couple of thousand candidates, so the closures are
the hot path: each variable costs one dict lookup, and nothing is interpreted
per call.

The package, in the order a text goes through it:

- :mod:`~tidings.core.ranking.syntax`: tokens, the parser, the checks made
  while parsing and :class:`RankingExpressionError`;
- :mod:`~tidings.core.ranking.tree`: the nodes the parser builds;
- :mod:`~tidings.core.ranking.scalar`: the closures that score one candidate;
- :mod:`~tidings.core.ranking.columns`: the closures that score many at once;
- :mod:`~tidings.core.ranking.functions`: the maths both share, the decay
  functions and :func:`recency_score`;
- :mod:`~tidings.core.ranking.expression`: :class:`RankingExpression` and
  :class:`Scorer`.
"""

from __future__ import annotations

from tidings.core.ranking.expression import RankingExpression, Scorer
from tidings.core.ranking.functions import (
    LIMIT,
    decay_exp,
    decay_gauss,
    decay_linear,
    recency_score,
)
from tidings.core.ranking.scalar import Values
from tidings.core.ranking.syntax import MAX_DEPTH, MAX_EXPRESSION_LENGTH, RankingExpressionError

__all__ = [
    "LIMIT",
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "RankingExpression",
    "RankingExpressionError",
    "Scorer",
    "Values",
    "decay_exp",
    "decay_gauss",
    "decay_linear",
    "recency_score",
]
