"""Per-candidate closures: a tree compiled for :meth:`Scorer.__call__` and
:meth:`Scorer.explain`, one specialised closure per node.

Evaluation is total: it never raises and always returns a finite float.
Division by zero, ``ln`` of a non-positive number and the like give 0.0;
overflow is clamped to ``±LIMIT``; a NaN anywhere becomes 0.0. Every closure
returns a number within ``±LIMIT`` (variables are brought within it as they
are read), which is what keeps this cheap: no operator ever sees an infinity
or a NaN, so none can make a NaN, and those that can leave the range
(``+ - * / ^ exp``) need one range comparison on their result, the rest none.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, TypeAlias

from tidings.core.ranking.functions import (
    _LN_LIMIT,
    LIMIT,
    _clamp,
    _coerce,
    _power,
    decay_exp,
    decay_gauss,
    decay_linear,
)
from tidings.core.ranking.tree import _Call, _Node, _Num, _Op, _Var

Values: TypeAlias = Mapping[str, float]
#: A compiled node: the values of the variables and the verb in, a number out.
_Fn: TypeAlias = Callable[[Values, str], float]
#: A node after compilation: a folded constant, or a closure.
_Code: TypeAlias = "float | _Fn"


# An empty mapping that cannot be mutated, for the keyword defaults.
_NOTHING: Final[Mapping[str, float]] = MappingProxyType({})


# -- closures -----------------------------------------------------------------
#
# Each builder takes closures and returns one. Within a closure `v` is the
# values mapping and `w` the verb. The arithmetic ones come in three shapes,
# closure-closure, closure-constant and constant-closure, so that a constant
# operand costs nothing per call.


def _constant_fn(k: float) -> _Fn:
    def f(v: Values, w: str) -> float:
        return k

    return f


def _as_fn(code: _Code) -> _Fn:
    return _constant_fn(code) if isinstance(code, float) else code


def _fold(make: Callable[..., _Fn], *codes: _Code) -> _Code:
    """The closure ``make`` builds over ``codes``, run now if they are all constants."""
    fn = make(*(_as_fn(code) for code in codes))
    if all(isinstance(code, float) for code in codes):
        return float(fn(_NOTHING, ""))
    return fn


def _variable(name: str, default: float) -> _Fn:
    def f(v: Values, w: str) -> float:
        x = v.get(name, default)
        c = x.__class__
        # ints pass as they are: float() would cost more than it saves.
        if (c is float or c is int) and -LIMIT <= x <= LIMIT:
            return x
        return _coerce(x, default)

    return f


def _add(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = a(v, w) + b(v, w)
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _add_k(a: _Fn, k: float) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = a(v, w) + k
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _k_add(k: float, b: _Fn) -> _Fn:
    return _add_k(b, k)


def _sub(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = a(v, w) - b(v, w)
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _sub_k(a: _Fn, k: float) -> _Fn:
    return _add_k(a, -k)


def _k_sub(k: float, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = k - b(v, w)
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _mul(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = a(v, w) * b(v, w)
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _mul_k(a: _Fn, k: float) -> _Fn:
    def f(v: Values, w: str) -> float:
        r = a(v, w) * k
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _k_mul(k: float, b: _Fn) -> _Fn:
    return _mul_k(b, k)


def _div(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        d = b(v, w)
        if d == 0:
            return 0.0
        r = a(v, w) / d
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _div_k(a: _Fn, k: float) -> _Fn:
    if k == 0.0:
        return _constant_fn(0.0)

    def f(v: Values, w: str) -> float:
        r = a(v, w) / k
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


def _k_div(k: float, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        d = b(v, w)
        if d == 0:
            return 0.0
        r = k / d
        return r if -LIMIT <= r <= LIMIT else _clamp(r)

    return f


_ArithShapes: TypeAlias = tuple[
    Callable[[_Fn, _Fn], _Fn], Callable[[_Fn, float], _Fn], Callable[[float, _Fn], _Fn]
]
_ARITHMETIC: Final[Mapping[str, _ArithShapes]] = {
    "+": (_add, _add_k, _k_add),
    "-": (_sub, _sub_k, _k_sub),
    "*": (_mul, _mul_k, _k_mul),
    "/": (_div, _div_k, _k_div),
}


def _arithmetic(op: str, a: _Code, b: _Code) -> _Code:
    both, right_constant, left_constant = _ARITHMETIC[op]
    if isinstance(a, float) and isinstance(b, float):
        return _fold(both, a, b)
    if isinstance(b, float):
        return right_constant(_as_fn(a), b)
    if isinstance(a, float):
        return left_constant(a, b)
    return both(a, b)


def _pow(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return _power(a(v, w), b(v, w))

    return f


def _neg(a: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return -a(v, w)

    return f


def _not(a: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return 0.0 if a(v, w) else 1.0

    return f


def _and(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return 1.0 if a(v, w) and b(v, w) else 0.0

    return f


def _or(a: _Fn, b: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return 1.0 if a(v, w) or b(v, w) else 0.0

    return f


def _comparison(test: Callable[[float, float], bool]) -> Callable[[_Fn, _Fn], _Fn]:
    def make(a: _Fn, b: _Fn) -> _Fn:
        def f(v: Values, w: str) -> float:
            return 1.0 if test(a(v, w), b(v, w)) else 0.0

        return f

    return make


_OPERATORS: Final[Mapping[str, Callable[..., _Fn]]] = {
    "^": _pow,
    "neg": _neg,
    "not": _not,
    "and": _and,
    "or": _or,
    "<": _comparison(operator.lt),
    "<=": _comparison(operator.le),
    ">": _comparison(operator.gt),
    ">=": _comparison(operator.ge),
    "==": _comparison(operator.eq),
    "!=": _comparison(operator.ne),
}


def _if(cond: _Fn, then: _Fn, other: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return then(v, w) if cond(v, w) else other(v, w)

    return f


def _ln(a: _Fn) -> _Fn:
    log = math.log

    def f(v: Values, w: str) -> float:
        x = a(v, w)
        return log(x) if x > 0 else 0.0

    return f


def _log10(a: _Fn) -> _Fn:
    log10 = math.log10

    def f(v: Values, w: str) -> float:
        x = a(v, w)
        return log10(x) if x > 0 else 0.0

    return f


def _exp(a: _Fn) -> _Fn:
    exp = math.exp

    def f(v: Values, w: str) -> float:
        x = a(v, w)
        return exp(x) if x < _LN_LIMIT else LIMIT

    return f


def _abs(a: _Fn) -> _Fn:
    def f(v: Values, w: str) -> float:
        return abs(a(v, w))

    return f


def _min(*fns: _Fn) -> _Fn:
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        a, b = fns

        def f2(v: Values, w: str) -> float:
            x = a(v, w)
            y = b(v, w)
            return x if x <= y else y

        return f2

    def f(v: Values, w: str) -> float:
        return min([g(v, w) for g in fns])

    return f


def _max(*fns: _Fn) -> _Fn:
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        a, b = fns

        def f2(v: Values, w: str) -> float:
            x = a(v, w)
            y = b(v, w)
            return x if x >= y else y

        return f2

    def f(v: Values, w: str) -> float:
        return max([g(v, w) for g in fns])

    return f


_FUNCTIONS: Final[Mapping[str, Callable[..., _Fn]]] = {
    "ln": _ln,
    "log": _log10,
    "exp": _exp,
    "abs": _abs,
    "min": _min,
    "max": _max,
}
_DECAY_FUNCTIONS: Final[Mapping[str, Callable[[float, float, float, float], float]]] = {
    "decay_exp": decay_exp,
    "decay_linear": decay_linear,
    "decay_gauss": decay_gauss,
}


def _decay(name: str, codes: list[_Code]) -> _Code:
    fn = _DECAY_FUNCTIONS[name]
    codes = [*codes, *(0.0, 0.5)[len(codes) - 2 :]]  # offset and decay default
    x, scale, offset, decay = codes
    if (
        not isinstance(x, float)
        and isinstance(scale, float)
        and isinstance(offset, float)
        and isinstance(decay, float)
    ):
        # The usual shape: only x varies, so the parameters are bound once.
        return _decay_of_x(fn, x, scale, offset, decay)

    def make(xf: _Fn, sf: _Fn, of: _Fn, df: _Fn) -> _Fn:
        def f(v: Values, w: str) -> float:
            return fn(xf(v, w), sf(v, w), of(v, w), df(v, w))

        return f

    return _fold(make, x, scale, offset, decay)


def _decay_of_x(
    fn: Callable[[float, float, float, float], float],
    x: _Fn,
    scale: float,
    offset: float,
    decay: float,
) -> _Fn:
    def f(v: Values, w: str) -> float:
        return fn(x(v, w), scale, offset, decay)

    return f


class _Builder:
    """Compiles a tree into closures for one set of weights and defaults."""

    def __init__(self, weights: dict[str, float], defaults: dict[str, float]) -> None:
        self._weights = weights
        self._defaults = defaults
        self.variables: dict[str, _Fn] = {}

    def variable(self, name: str) -> _Fn:
        """One closure per name, shared by every use of it (and by explain)."""
        if name not in self.variables:
            self.variables[name] = _variable(name, self._defaults.get(name, 0.0))
        return self.variables[name]

    def weight(self) -> _Code:
        if not self._weights:
            return 1.0  # every verb weighs 1
        get = self._weights.get

        def f(v: Values, w: str) -> float:
            return get(w, 1.0)

        return f

    def build(self, node: _Node) -> _Code:
        if isinstance(node, _Num):
            return node.value
        if isinstance(node, _Var):
            return self.variable(node.name)
        if isinstance(node, _Op):
            return self._operator(node)
        if isinstance(node, _Call):
            return self._call(node)
        return self.weight()  # a _VerbRef, which only weight() holds

    def _operator(self, node: _Op) -> _Code:
        codes = [self.build(arg) for arg in node.args]
        if node.op in _ARITHMETIC:
            return _arithmetic(node.op, codes[0], codes[1])
        return _fold(_OPERATORS[node.op], *codes)

    def _call(self, node: _Call) -> _Code:
        if node.name == "weight":
            return self.weight()
        if node.name == "if":
            cond, then, other = (self.build(arg) for arg in node.args)
            if isinstance(cond, float):  # only the branch taken is kept
                return then if cond else other
            return _if(cond, _as_fn(then), _as_fn(other))
        codes = [self.build(arg) for arg in node.args]
        if node.name in _DECAY_FUNCTIONS:
            return _decay(node.name, codes)
        return _fold(_FUNCTIONS[node.name], *codes)
