"""Column closures: a tree compiled for :meth:`Scorer.score_many`, one
closure per node over the values of all the candidates.

A page read scores all its candidates at once, and a call per candidate pays
a Python call per node and a dict lookup per variable each time: a couple of
microseconds, some milliseconds a page. So :meth:`RankingExpression.compile`
builds a second tree from the same one, of closures over columns, and
:meth:`Scorer.score_many` takes one sequence per variable and the verbs, and
runs each node once for the whole page, its loop a list comprehension or a
``map`` in C. Each element is the same Python expression on the same operands
as in the per-candidate closure, so the scores are bit-for-bit those of
calling the scorer once per candidate; what columns save is the calls.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final, TypeAlias

from tidings.core.ranking.functions import (
    _LN_LIMIT,
    LIMIT,
    _clamp,
    _clamp_decay,
    _coerce,
    _power,
)
from tidings.core.ranking.scalar import (
    _ARITHMETIC,
    _DECAY_FUNCTIONS,
    _FUNCTIONS,
    _NOTHING,
    _OPERATORS,
    _constant_fn,
    _Fn,
)
from tidings.core.ranking.tree import _Call, _Node, _Num, _Op, _Var

#: The variables of n candidates, as Scorer.score_many has cleaned them: one
#: list of n numbers per variable read.
_Columns: TypeAlias = Mapping[str, list[float]]
#: A compiled node of the column tree: the columns and the n verbs in, the
#: node's n numbers out.
_ColFn: TypeAlias = Callable[[_Columns, Sequence[str]], list[float]]
#: An operand's values: a column, or a constant repeated.
_Operand: TypeAlias = Callable[[_Columns, Sequence[str]], Iterable[float]]


# -- columns ------------------------------------------------------------------
#
# The same tree compiled a second time, for Scorer.score_many. Within a column
# closure `c` maps each variable read to its cleaned column (a list of the n
# values, brought within range as _variable brings one) and `w` is the verbs;
# it returns a list of n numbers. Closures are only ever called with n >= 1.
#
# Bit-for-bit equality with __call__ rests on one rule: each element is the
# same Python expression on the same operands as in its closure in scalar.py
# (``x + k`` where _add_k has ``a(v, w) + k``, ``-k`` added where _sub_k
# adds it). Ints included: a variable holding an int keeps it, as _variable
# does, so int arithmetic stays exact here as there. Constants are folded by
# the closures of scalar.py, as _fold folds them, and a constant operand is
# never a list: the shapes take it as a float (``x * 2`` is one comprehension)
# or, elsewhere, as ``itertools.repeat``.
#
# The range check of ``+ - * /`` costs as much as the operation. Each node
# knows a bound on the magnitude of its values, so the check is left out
# where it cannot fail (``1 + ln(...)``, ``decay * (1 + ln(...))``), and is
# otherwise done with min() and max() over the whole column, loops in C.


@dataclass(frozen=True, slots=True)
class _Column:
    """A node of the column tree that is not a constant."""

    fn: _ColFn
    #: No value of the node is larger than this in magnitude (inf: unknown).
    bound: float
    #: Whether values may be ints, which only variables bring in. Int
    #: arithmetic is exact, not rounded, so the bounds do not hold for it.
    ints: bool = False


#: A node of the column tree after compilation: a folded constant, or a column.
_ColCode: TypeAlias = "float | _Column"

# |ln x| and |log10 x| for any positive float or int up to LIMIT (the least
# positive float is about 4.9e-324, and ln of that is about -744.4).
_LN_BOUND: Final = 745.0
_LOG10_BOUND: Final = 324.0
_PLAIN_NUMBERS: Final = frozenset({float, int})


def _read_column(name: str, raw: Sequence[Any] | None, default: float, n: int) -> list[float]:
    """The values of variable ``name`` for n candidates, each as _variable reads it.

    ``raw`` is the caller's sequence, taken as it is when it holds only plain
    numbers within range (the usual case, checked with loops in C); it is
    never changed, and the nodes over it make new lists.
    """
    if raw is None:
        return [default] * n
    if len(raw) != n:
        raise ValueError(f"column {name!r} has {len(raw)} values for {n} verbs")
    if set(map(type, raw)) <= _PLAIN_NUMBERS:
        try:
            total = sum(raw)
        except OverflowError:  # an int beyond any float, added to a float
            total = math.nan
        # A NaN or an infinity would make the sum one (and min and max
        # untrustworthy); without them, min and max settle the range.
        if total - total == 0 and min(raw) >= -LIMIT and max(raw) <= LIMIT:
            return raw if isinstance(raw, list) else list(raw)
    # One value at a time, then: the test of _variable, and what it does with the rest.
    return [
        x
        if ((k := x.__class__) is float or k is int) and -LIMIT <= x <= LIMIT
        else _coerce(x, default)
        for x in raw
    ]


def _bound(code: _ColCode) -> float:
    return abs(code) if isinstance(code, float) else code.bound


def _has_ints(code: _ColCode) -> bool:
    return not isinstance(code, float) and code.ints


def _operand(code: _ColCode) -> _Operand:
    """The values of an operand: a column's, or a constant repeated. zip and map
    stop at the end of the other operands (an all-constant node is folded, so
    there is one), which is why no zip over operands is strict."""
    if isinstance(code, float):
        k = code

        def constant(c: _Columns, w: Sequence[str]) -> Iterable[float]:
            return repeat(k)

        return constant
    return code.fn


def _all_constant(codes: Sequence[_ColCode]) -> list[float] | None:
    constants = [code for code in codes if isinstance(code, float)]
    return constants if len(constants) == len(codes) else None


def _fold_now(make: Callable[..., _Fn], *constants: float) -> float:
    """What _fold makes of ``make`` over constants: the value __call__ would use."""
    return float(make(*map(_constant_fn, constants))(_NOTHING, ""))


def _within(column: list[float]) -> list[float]:
    """``column`` with each value brought back within ±LIMIT, as the closures'
    range check does. Only for ``+ - * /``, whose results are never NaN (their
    operands are finite), so min() and max() can be trusted."""
    if min(column) >= -LIMIT and max(column) <= LIMIT:
        return column
    return [r if -LIMIT <= r <= LIMIT else _clamp(r) for r in column]


def _checked(fn: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return _within(fn(c, w))

    return f


def _map2(op: Callable[[Any, Any], Any]) -> Callable[[_ColFn, _ColFn], _ColFn]:
    def make(a: _ColFn, b: _ColFn) -> _ColFn:
        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return list(map(op, a(c, w), b(c, w)))

        return f

    return make


def _plus_k(a: _ColFn, k: float) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [x + k for x in a(c, w)]

    return f


def _k_plus(k: float, b: _ColFn) -> _ColFn:
    return _plus_k(b, k)


def _minus_k(a: _ColFn, k: float) -> _ColFn:
    return _plus_k(a, -k)


def _k_minus(k: float, b: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [k - x for x in b(c, w)]

    return f


def _times_k(a: _ColFn, k: float) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [x * k for x in a(c, w)]

    return f


def _k_times(k: float, b: _ColFn) -> _ColFn:
    return _times_k(b, k)


def _over(a: _ColFn, b: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [0.0 if d == 0 else x / d for x, d in zip(a(c, w), b(c, w), strict=True)]

    return f


def _over_k(a: _ColFn, k: float) -> _ColFn:
    # k is not 0: _column_arithmetic folds a / 0 to 0, as _div_k does.
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [x / k for x in a(c, w)]

    return f


def _k_over(k: float, b: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [0.0 if d == 0 else k / d for d in b(c, w)]

    return f


_ColumnShapes: TypeAlias = tuple[
    Callable[[_ColFn, _ColFn], _ColFn],
    Callable[[_ColFn, float], _ColFn],
    Callable[[float, _ColFn], _ColFn],
]
_COLUMN_ARITHMETIC: Final[Mapping[str, _ColumnShapes]] = {
    "+": (_map2(operator.add), _plus_k, _k_plus),
    "-": (_map2(operator.sub), _minus_k, _k_minus),
    "*": (_map2(operator.mul), _times_k, _k_times),
    "/": (_over, _over_k, _k_over),
}


def _column_arithmetic(op: str, a: _ColCode, b: _ColCode) -> _ColCode:
    both, right_constant, left_constant = _COLUMN_ARITHMETIC[op]
    if isinstance(a, _Column):
        if isinstance(b, _Column):
            fn = both(a.fn, b.fn)
        elif op == "/" and b == 0.0:
            return 0.0  # every quotient is 0, as with _div_k
        else:
            fn = right_constant(a.fn, b)
    elif isinstance(b, _Column):
        fn = left_constant(a, b.fn)
    else:
        return _fold_now(_ARITHMETIC[op][0], a, b)
    ints = _has_ints(a) and _has_ints(b)
    # Rounding is monotonic, so a float result lies within the bound worked
    # out in floats (an int operand is rounded to a float first, within its
    # bound too). Int with int is exact, and may pass a bound rounded down;
    # today such operands are variables or come from them, bound by LIMIT,
    # so the sum is past LIMIT and checked anyway, but `ints` keeps it so.
    if op == "/":
        bound = _bound(a) / abs(b) if isinstance(b, float) else math.inf
    elif op == "*":
        bound = _bound(a) * _bound(b)
    else:
        bound = _bound(a) + _bound(b)
    if ints or not bound <= LIMIT:
        return _Column(_checked(fn), LIMIT, ints)
    return _Column(fn, bound)


def _column_neg(a: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [-x for x in a(c, w)]

    return f


def _column_not(a: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [0.0 if x else 1.0 for x in a(c, w)]

    return f


def _column_abs(a: _ColFn) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return list(map(abs, a(c, w)))

    return f


def _column_log(log: Callable[[float], float]) -> Callable[[_ColFn], _ColFn]:
    def make(a: _ColFn) -> _ColFn:
        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            xs = a(c, w)
            if min(xs) > 0:  # the usual case, then the loop is map's, in C
                return list(map(log, xs))
            return [log(x) if x > 0 else 0.0 for x in xs]

        return f

    return make


def _column_exp(a: _ColFn) -> _ColFn:
    exp = math.exp

    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        xs = a(c, w)
        if max(xs) < _LN_LIMIT:
            return list(map(exp, xs))
        return [exp(x) if x < _LN_LIMIT else LIMIT for x in xs]

    return f


# Each one-operand operator and function: its column maker, and the bound of
# its values (None: the operand's, ints kept). exp's values are within LIMIT
# only as far as the libm's exp is monotonic, so its bound is not trusted.
_COLUMN_UNARY: Final[Mapping[str, tuple[Callable[[_ColFn], _ColFn], float | None]]] = {
    "neg": (_column_neg, None),
    "abs": (_column_abs, None),
    "not": (_column_not, 1.0),
    "ln": (_column_log(math.log), _LN_BOUND),
    "log": (_column_log(math.log10), _LOG10_BOUND),
    "exp": (_column_exp, math.inf),
}


def _column_unary(name: str, fold: Callable[[_Fn], _Fn], code: _ColCode) -> _ColCode:
    if isinstance(code, float):
        return _fold_now(fold, code)
    make, bound = _COLUMN_UNARY[name]
    if bound is None:
        return _Column(make(code.fn), code.bound, code.ints)
    return _Column(make(code.fn), bound)


def _column_power(a: _Operand, b: _Operand) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return list(map(_power, a(c, w), b(c, w)))

    return f


def _column_and(a: _Operand, b: _Operand) -> _ColFn:
    # Both operands are computed whole; as evaluation is total and has no
    # side effects, the result is that of the short-circuiting _and.
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [1.0 if x and y else 0.0 for x, y in zip(a(c, w), b(c, w), strict=False)]

    return f


def _column_or(a: _Operand, b: _Operand) -> _ColFn:
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [1.0 if x or y else 0.0 for x, y in zip(a(c, w), b(c, w), strict=False)]

    return f


def _column_comparison(
    test: Callable[[float, float], bool],
) -> Callable[[_Operand, _Operand], _ColFn]:
    def make(a: _Operand, b: _Operand) -> _ColFn:
        # float(True) is 1.0 and float(False) 0.0: the closure's values.
        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return list(map(float, map(test, a(c, w), b(c, w))))

        return f

    return make


# Each other two-operand operator: its column maker and the bound of its values.
_COLUMN_BINARY: Final[Mapping[str, tuple[Callable[[_Operand, _Operand], _ColFn], float]]] = {
    "^": (_column_power, LIMIT),
    "and": (_column_and, 1.0),
    "or": (_column_or, 1.0),
    "<": (_column_comparison(operator.lt), 1.0),
    "<=": (_column_comparison(operator.le), 1.0),
    ">": (_column_comparison(operator.gt), 1.0),
    ">=": (_column_comparison(operator.ge), 1.0),
    "==": (_column_comparison(operator.eq), 1.0),
    "!=": (_column_comparison(operator.ne), 1.0),
}


def _column_binary(op: str, a: _ColCode, b: _ColCode) -> _ColCode:
    if isinstance(a, float) and isinstance(b, float):
        return _fold_now(_OPERATORS[op], a, b)
    make, bound = _COLUMN_BINARY[op]
    return _Column(make(_operand(a), _operand(b)), bound)


def _column_if(cond: _ColFn, then: _Operand, other: _Operand) -> _ColFn:
    # Both branches are computed whole; see _column_and.
    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return [t if x else o for x, t, o in zip(cond(c, w), then(c, w), other(c, w), strict=False)]

    return f


def _column_extreme(name: str, codes: list[_ColCode]) -> _ColCode:
    """min or max, as _min and _max compute them."""
    constants = _all_constant(codes)
    if constants is not None:
        return _fold_now(_FUNCTIONS[name], *constants)
    if len(codes) == 1:
        return codes[0]
    operands = [_operand(code) for code in codes]
    bound = max(_bound(code) for code in codes)
    ints = any(_has_ints(code) for code in codes)
    if len(operands) == 2:
        a, b = operands
        if name == "min":

            def f2(c: _Columns, w: Sequence[str]) -> list[float]:
                return [x if x <= y else y for x, y in zip(a(c, w), b(c, w), strict=False)]

        else:

            def f2(c: _Columns, w: Sequence[str]) -> list[float]:
                return [x if x >= y else y for x, y in zip(a(c, w), b(c, w), strict=False)]

        return _Column(f2, bound, ints)
    # min(x, y, z) compares as min([x, y, z]) does.
    pick: Callable[..., float] = min if name == "min" else max

    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return list(map(pick, *(operand(c, w) for operand in operands)))

    return _Column(f, bound, ints)


def _column_decay(name: str, codes: list[_ColCode]) -> _ColCode:
    fn = _DECAY_FUNCTIONS[name]
    codes = [*codes, *(0.0, 0.5)[len(codes) - 2 :]]  # offset and decay default
    constants = _all_constant(codes)
    if constants is not None:
        return float(fn(*constants))  # what _decay folds it to
    x, scale, offset, decay = codes
    if (
        isinstance(x, _Column)
        and isinstance(scale, float)
        and isinstance(offset, float)
        and isinstance(decay, float)
    ):
        inline = _decay_of_x_column(name, x.fn, scale, offset, decay)
        if inline is not None:
            return inline
    operands = [_operand(code) for code in codes]

    def f(c: _Columns, w: Sequence[str]) -> list[float]:
        return list(map(fn, *(operand(c, w) for operand in operands)))

    # Every decay lies within [0, 1], and is a float.
    return _Column(f, 1.0)


def _decay_of_x_column(
    name: str, x: _ColFn, scale: float, offset: float, decay: float
) -> _ColCode | None:
    """The usual shape, only x varying, with the decay function written out in
    the comprehension (a call per element would cost as much as all the rest);
    None for the one case it does not cover, decay_linear with decay 1."""
    if not scale > 0.0:
        return 0.0  # every decay function gives 0 then, whatever x
    d = _clamp_decay(decay)
    pow_ = math.pow
    # Each follows its function line by line: t is the distance, and the
    # branch where it is not > 0 gives 1.0 if t <= 0.0 else 0.0 (t is NaN).
    if name == "decay_exp":

        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return [
                pow_(d, t / scale) if (t := v - offset) > 0.0 else (1.0 if t <= 0.0 else 0.0)
                for v in x(c, w)
            ]

    elif name == "decay_gauss":

        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return [
                pow_(d, (r := t / scale) * r)
                if (t := v - offset) > 0.0
                else (1.0 if t <= 0.0 else 0.0)
                for v in x(c, w)
            ]

    elif d != 1.0:  # decay_linear; max(0.0, m) is m if m > 0.0 else 0.0
        k = 1.0 - d

        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return [
                (m if (m := 1.0 - k * (t / scale)) > 0.0 else 0.0)
                if (t := v - offset) > 0.0
                else (1.0 if t <= 0.0 else 0.0)
                for v in x(c, w)
            ]

    else:
        return None
    return _Column(f, 1.0)


class _ColumnBuilder:
    """Compiles a tree into column closures; folds exactly what _Builder folds
    (and a / 0, which _Builder leaves a closure giving 0)."""

    def __init__(self, weights: dict[str, float], defaults: dict[str, float]) -> None:
        self._weights = weights
        self._defaults = defaults
        #: Each variable the column tree reads, with its default.
        self.variables: dict[str, float] = {}
        self._columns: dict[str, _Column] = {}

    def variable(self, name: str) -> _Column:
        """One column per name: score_many reads each variable once."""
        if name not in self._columns:
            self.variables[name] = self._defaults.get(name, 0.0)

            def f(c: _Columns, w: Sequence[str]) -> list[float]:
                return c[name]

            self._columns[name] = _Column(f, LIMIT, ints=True)
        return self._columns[name]

    def weight(self) -> _ColCode:
        if not self._weights:
            return 1.0
        get = self._weights.get

        def f(c: _Columns, w: Sequence[str]) -> list[float]:
            return list(map(get, w, repeat(1.0)))

        return _Column(f, max(1.0, *map(abs, self._weights.values())))

    def build(self, node: _Node) -> _ColCode:
        if isinstance(node, _Num):
            return node.value
        if isinstance(node, _Var):
            return self.variable(node.name)
        if isinstance(node, _Op):
            return self._operator(node)
        if isinstance(node, _Call):
            return self._call(node)
        return self.weight()

    def _operator(self, node: _Op) -> _ColCode:
        codes = [self.build(arg) for arg in node.args]
        if node.op in _ARITHMETIC:
            return _column_arithmetic(node.op, codes[0], codes[1])
        if node.op in _COLUMN_UNARY:
            return _column_unary(node.op, _OPERATORS[node.op], codes[0])
        return _column_binary(node.op, codes[0], codes[1])

    def _call(self, node: _Call) -> _ColCode:
        if node.name == "weight":
            return self.weight()
        if node.name == "if":
            cond, then, other = (self.build(arg) for arg in node.args)
            if isinstance(cond, float):
                return then if cond else other
            bound = max(_bound(then), _bound(other))
            ints = _has_ints(then) or _has_ints(other)
            return _Column(_column_if(cond.fn, _operand(then), _operand(other)), bound, ints)
        codes = [self.build(arg) for arg in node.args]
        if node.name in _DECAY_FUNCTIONS:
            return _column_decay(node.name, codes)
        if node.name in ("min", "max"):
            return _column_extreme(node.name, codes)
        return _column_unary(node.name, _FUNCTIONS[node.name], codes[0])
