"""The public face: a :class:`RankingExpression`, parsed once, and the
:class:`Scorer` it compiles to, which runs both trees of closures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tidings.core.errors import ValidationError
from tidings.core.ranking.columns import _ColCode, _ColumnBuilder, _read_column
from tidings.core.ranking.functions import _clamp
from tidings.core.ranking.scalar import _NOTHING, Values, _as_fn, _Builder, _Code, _Fn
from tidings.core.ranking.syntax import _Parser
from tidings.core.ranking.tree import _Node, _Var, _VerbRef, _walk

# -- the public face ----------------------------------------------------------


@dataclass(frozen=True)
class RankingExpression:
    """A parsed ranking expression; :meth:`parse` it, then :meth:`compile` it."""

    text: str
    #: Every variable the text names; ``verb`` included when it uses weight(verb).
    variables: frozenset[str]
    uses_weight: bool
    # Kept from parse so compile does not parse again (absent if built by hand).
    _tree: _Node | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def parse(cls, text: str) -> RankingExpression:
        """Parse ``text``; raises :class:`RankingExpressionError` if malformed."""
        tree = _Parser(text).parse()
        nodes = _walk(tree)
        uses_weight = any(isinstance(node, _VerbRef) for node in nodes)
        names = {node.name for node in nodes if isinstance(node, _Var)}
        if uses_weight:
            names.add("verb")
        expression = cls(text, frozenset(names), uses_weight)
        object.__setattr__(expression, "_tree", tree)
        return expression

    def compile(
        self,
        *,
        weights: Mapping[str, float] = _NOTHING,
        defaults: Mapping[str, float] = _NOTHING,
    ) -> Scorer:
        """A :class:`Scorer` for this expression.

        ``weights`` maps a verb to what ``weight(verb)`` gives for it (1.0 for
        verbs it lacks); ``defaults`` maps a variable to its value when the
        values scored lack it (0.0 for variables it lacks). Both are copied.
        """
        tree = self._tree if self._tree is not None else _Parser(self.text).parse()
        copied_weights = _finite(weights, "weights")
        copied_defaults = _finite(defaults, "defaults")
        builder = _Builder(copied_weights, copied_defaults)
        root = _as_fn(builder.build(tree))
        for name in self.variables - {"verb"}:
            builder.variable(name)  # explain reports even those folded away
        columns = _ColumnBuilder(copied_weights, copied_defaults)
        return Scorer(
            self,
            root,
            builder.variables,
            builder.weight() if self.uses_weight else None,
            columns.build(tree),
            columns.variables,
        )


def _finite(numbers: Mapping[str, float], what: str) -> dict[str, float]:
    """A copy of ``numbers``, each checked to be a finite number and kept within ±LIMIT."""
    copied: dict[str, float] = {}
    for key, value in numbers.items():
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            raise ValidationError(f"{what}[{key!r}] must be a finite number", field="ranking")
        copied[key] = _clamp(float(value))
    return copied


class Scorer:
    """A compiled ranking expression: call it with a candidate's values and verb,
    or give :meth:`score_many` the columns of many candidates.

    Calls never raise and always return a finite float.
    """

    __slots__ = ("_column_defaults", "_columns", "_root", "_variables", "_weight", "expression")

    def __init__(
        self,
        expression: RankingExpression,
        root: _Fn,
        variables: Mapping[str, _Fn],
        weight: _Code | None,
        columns: _ColCode,
        column_defaults: Mapping[str, float],
    ) -> None:
        self.expression = expression
        self._root = root
        self._variables = dict(sorted(variables.items()))
        self._weight = None if weight is None else _as_fn(weight)
        self._columns = columns
        self._column_defaults = dict(column_defaults)

    def __call__(self, values: Values, verb: str = "") -> float:
        r = self._root(values, verb)
        # Variables may hold ints, and arithmetic on ints stays int.
        return r if r.__class__ is float else float(r)

    def score_many(
        self, columns: Mapping[str, Sequence[float | None]], verbs: Sequence[str]
    ) -> list[float]:
        """The scores of n candidates at once, n being ``len(verbs)``.

        ``columns[name][i]`` is variable ``name`` of candidate ``i``, and
        ``verbs[i]`` its verb. A value of None, or a name ``columns`` lacks,
        means the default, as a missing value does for a call. The result is
        exactly ``[self(values_i, verbs[i]) for i in range(n)]``, where
        ``values_i`` maps each name to ``columns[name][i]``; it is a new list.
        Raises ValueError if a column the expression reads is not n long.
        """
        n = len(verbs)
        root = self._columns
        if isinstance(root, float):
            return [root] * n
        if n == 0:
            return []  # min() and max() in the columns want at least one value
        cleaned = {
            name: _read_column(name, columns.get(name), default, n)
            for name, default in self._column_defaults.items()
        }
        scores = root.fn(cleaned, verbs)
        # A column of ints is a variable's, perhaps the caller's own list, or
        # made from one; any other is a new list of floats already.
        return list(map(float, scores)) if root.ints else scores

    def explain(self, values: Values, verb: str = "") -> dict[str, float]:
        """The score, then each variable's value as used (defaults applied,
        sorted by name), then ``weight(verb)`` if the expression uses it."""
        explained = {"score": self(values, verb)}
        for name, variable in self._variables.items():
            explained[name] = float(variable(values, verb))
        if self._weight is not None:
            explained["weight(verb)"] = float(self._weight(values, verb))
        return explained

    def __repr__(self) -> str:
        return f"Scorer({self.expression.text!r})"
