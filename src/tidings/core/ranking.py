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

Evaluation is total: it never raises and always returns a finite float.
Division by zero, ``ln`` of a non-positive number and the like give 0.0;
overflow is clamped to ``±LIMIT``; a NaN anywhere becomes 0.0. Every closure
returns a number within ``±LIMIT`` (variables are brought within it as they
are read), which is what keeps this cheap: no operator ever sees an infinity
or a NaN, so none can make a NaN, and those that can leave the range
(``+ - * / ^ exp``) need one range comparison on their result, the rest none.

A page read scores all its candidates at once, and a call per candidate pays
a Python call per node and a dict lookup per variable each time: a couple of
microseconds, some milliseconds a page. So :meth:`RankingExpression.compile`
builds a second tree from the same one, of closures over columns, and
:meth:`Scorer.score_many` takes one sequence per variable and the verbs, and
runs each node once for the whole page, its loop a list comprehension or a
``map`` in C. Each element is the same Python expression on the same operands
as in the per-candidate closure, so the scores are bit-for-bit those of
calling the scorer once per candidate; what columns save is the calls.

Two more things live here because they share the decay maths: the decay
functions themselves (plain functions, usable on their own) and
:func:`recency_score`, the score an activity gets at write time.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from tidings.core.errors import ValidationError

#: Longest expression text accepted, in characters.
MAX_EXPRESSION_LENGTH: Final = 2000
#: Deepest nesting accepted: of parentheses and calls while parsing, and of the
#: tree itself (``a+b+c+...`` is a tree as deep as it is long). It bounds the
#: recursion of the parser, of compilation and of every evaluation.
MAX_DEPTH: Final = 64
#: Every intermediate result lies within ±LIMIT; overflow is clamped to it.
LIMIT: Final = 1e300

_LN_LIMIT: Final = math.log(LIMIT)
_LN2: Final = math.log(2.0)
_MS_PER_HOUR: Final = 3_600_000.0

Values: TypeAlias = Mapping[str, float]
#: A compiled node: the values of the variables and the verb in, a number out.
_Fn: TypeAlias = Callable[[Values, str], float]
#: A node after compilation: a folded constant, or a closure.
_Code: TypeAlias = "float | _Fn"
#: The variables of n candidates, as Scorer.score_many has cleaned them: one
#: list of n numbers per variable read.
_Columns: TypeAlias = Mapping[str, list[float]]
#: A compiled node of the column tree: the columns and the n verbs in, the
#: node's n numbers out.
_ColFn: TypeAlias = Callable[[_Columns, Sequence[str]], list[float]]
#: An operand's values: a column, or a constant repeated.
_Operand: TypeAlias = Callable[[_Columns, Sequence[str]], Iterable[float]]

# An empty mapping that cannot be mutated, for the keyword defaults.
_NOTHING: Final[Mapping[str, float]] = MappingProxyType({})


class RankingExpressionError(ValidationError):
    """A ranking expression is malformed; ``position`` is the 0-based offset of
    the offending token in the text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}", field="ranking")
        self.position = position


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


# -- tokens -------------------------------------------------------------------

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(
    rf"""
    (?P<space>\s+)
  | (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>{_NAME}(?:\.{_NAME})*)
  | (?P<op><=|>=|==|!=|[-+*/^<>(),])
    """,
    re.VERBOSE,
)
# A number running straight into one of these is malformed ("1e", "2x", "1.2.3").
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]")
_KEYWORD_OPERATORS: Final = frozenset({"and", "or", "not"})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "num", "name", "op" (keywords and, or, not included) or "end"
    text: str
    pos: int

    def show(self) -> str:
        return "end of input" if self.kind == "end" else f"'{self.text}'"

    def is_op(self, text: str) -> bool:
        return self.kind == "op" and self.text == text


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise RankingExpressionError(f"unexpected character {text[pos]!r}", pos)
        kind = match.lastgroup or ""
        word = match.group()
        if kind == "num":
            if _NUMBER_TAIL.match(text, match.end()):
                raise RankingExpressionError(f"malformed number starting {word!r}", pos)
        elif kind == "name":
            _check_name(text, word, pos, match.end())
            if word in _KEYWORD_OPERATORS:
                kind = "op"
        if kind != "space":
            tokens.append(_Token(kind, word, pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _check_name(text: str, word: str, pos: int, end: int) -> None:
    """Only ``extra.NAME`` may be dotted, and a name may not end in a dot."""
    if text.startswith(".", end):
        raise RankingExpressionError(f"expected a name after '{word}.'", pos)
    if "." in word and (word.count(".") > 1 or not word.startswith("extra.")):
        raise RankingExpressionError(f"unknown dotted name {word!r} (only extra.NAME)", pos)


# -- the tree -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Num:
    value: float
    height: int = 1


@dataclass(frozen=True, slots=True)
class _Var:
    name: str
    height: int = 1


@dataclass(frozen=True, slots=True)
class _VerbRef:
    """``verb`` as the argument of ``weight``, the only place it may stand."""

    pos: int
    height: int = 1


@dataclass(frozen=True, slots=True)
class _Op:
    """An operator; ``neg`` and ``not`` have one argument, the rest two."""

    op: str
    args: tuple[_Node, ...]
    height: int


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    args: tuple[_Node, ...]
    height: int


_Node: TypeAlias = _Num | _Var | _VerbRef | _Op | _Call

# -- the parser ---------------------------------------------------------------

# Binding powers, low to high. A binary operator binds while its power is
# above the caller's; its right operand is parsed at its own power, which
# makes it left-associative (`^` parses at one less: right-associative).
_OR, _AND, _NOT, _COMPARE, _ADD, _MUL, _UNARY, _POW = 1, 2, 3, 4, 5, 6, 7, 8
_COMPARISONS: Final = frozenset({"<", "<=", ">", ">=", "==", "!="})
_INFIX: Final[Mapping[str, int]] = {
    "or": _OR,
    "and": _AND,
    **dict.fromkeys(_COMPARISONS, _COMPARE),
    "+": _ADD,
    "-": _ADD,
    "*": _MUL,
    "/": _MUL,
    "^": _POW,
}
# Fewest and most arguments of each function (None: no most).
_ARITY: Final[Mapping[str, tuple[int, int | None]]] = {
    "if": (3, 3),
    "ln": (1, 1),
    "log": (1, 1),
    "exp": (1, 1),
    "abs": (1, 1),
    "min": (1, None),
    "max": (1, None),
    "decay_exp": (2, 4),
    "decay_linear": (2, 4),
    "decay_gauss": (2, 4),
    "weight": (1, 1),
}
_DECAYS: Final = frozenset({"decay_exp", "decay_linear", "decay_gauss"})


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > MAX_EXPRESSION_LENGTH:
            raise RankingExpressionError(
                f"expression longer than {MAX_EXPRESSION_LENGTH} characters",
                MAX_EXPRESSION_LENGTH,
            )
        self._tokens = _tokenize(text)
        self._i = 0
        self._level = 0  # how many _expression calls are under way

    def parse(self) -> _Node:
        if self._peek().kind == "end":
            raise RankingExpressionError("empty expression", 0)
        node = self._expression(0)
        token = self._peek()
        if token.kind != "end":
            raise RankingExpressionError(f"unexpected {token.show()}", token.pos)
        return node

    def _peek(self) -> _Token:
        return self._tokens[self._i]

    def _advance(self) -> _Token:
        token = self._tokens[self._i]
        if token.kind != "end":
            self._i += 1
        return token

    def _expression(self, power: int) -> _Node:
        self._level += 1
        if self._level > MAX_DEPTH:
            raise RankingExpressionError(
                f"expression nested deeper than {MAX_DEPTH}", self._peek().pos
            )
        left = self._prefix(power)
        compared = False  # was the last operator applied here a comparison?
        while True:
            token = self._peek()
            bind = _INFIX.get(token.text, 0) if token.kind == "op" else 0
            if bind <= power:
                break
            if compared and token.text in _COMPARISONS:
                raise RankingExpressionError("comparisons cannot be chained", token.pos)
            self._advance()
            right = self._expression(bind - 1 if token.text == "^" else bind)
            left = _op(token, left, right)
            compared = token.text in _COMPARISONS
        self._level -= 1
        return left

    def _prefix(self, power: int) -> _Node:
        token = self._advance()
        if token.kind == "num":
            return _number(token)
        if token.kind == "name":
            return self._name(token)
        if token.is_op("-"):
            return _op(token, self._expression(_UNARY))
        if token.is_op("+"):
            return self._expression(_UNARY)
        if token.is_op("not") and power <= _NOT:  # not inside arithmetic: `1 + not x`
            return _op(token, self._expression(_NOT))
        if token.is_op("("):
            inner = self._expression(0)
            self._close(token)
            return inner
        raise RankingExpressionError(f"unexpected {token.show()}", token.pos)

    def _close(self, opening: _Token) -> None:
        token = self._advance()
        if token.kind == "end":
            raise RankingExpressionError("unclosed '('", opening.pos)
        if not token.is_op(")"):
            raise RankingExpressionError(f"unexpected {token.show()}", token.pos)

    def _name(self, token: _Token) -> _Node:
        name = token.text
        if self._peek().is_op("("):
            return self._call(token)
        if name == "if":
            raise RankingExpressionError("unexpected 'if'", token.pos)
        if name in _ARITY:
            raise RankingExpressionError(f"'{name}' is a function: write {name}(...)", token.pos)
        if name == "verb":
            raise RankingExpressionError("'verb' may only be used as weight(verb)", token.pos)
        return _Var(name)

    def _call(self, name: _Token) -> _Node:
        opening = self._advance()
        if name.text not in _ARITY:
            raise RankingExpressionError(f"unknown function '{name.text}'", name.pos)
        if name.text == "weight":
            return self._weight(name, opening)
        args, positions = self._arguments(opening)
        _check_arity(name, len(args))
        if name.text in _DECAYS:
            _check_decay_constants(args, positions)
        return _Call(name.text, tuple(args), _height(name, args))

    def _weight(self, name: _Token, opening: _Token) -> _Node:
        start = self._peek()
        # `verb` is allowed as the whole argument and nowhere else.
        after = self._lookahead()
        is_verb = start.kind == "name" and start.text == "verb"
        if is_verb and after.kind == "end":
            raise RankingExpressionError("unclosed '('", opening.pos)
        if is_verb and (after.is_op(",") or after.is_op(")")):
            self._advance()
            args: list[_Node] = [_VerbRef(start.pos)]
            if self._advance().is_op(","):
                args += self._arguments(opening, started=True)[0]
        else:
            args = self._arguments(opening)[0]
        _check_arity(name, len(args))
        if not isinstance(args[0], _VerbRef):
            raise RankingExpressionError("weight() takes exactly the name verb", start.pos)
        return _Call("weight", (args[0],), 2)

    def _lookahead(self) -> _Token:
        return self._tokens[min(self._i + 1, len(self._tokens) - 1)]

    def _arguments(
        self, opening: _Token, *, started: bool = False
    ) -> tuple[list[_Node], list[int]]:
        """The arguments up to the closing parenthesis, and where each starts.

        ``started``: the first argument and its comma were consumed already.
        """
        args: list[_Node] = []
        positions: list[int] = []
        if not started and self._peek().is_op(")"):
            self._advance()
            return args, positions
        while True:
            positions.append(self._peek().pos)
            args.append(self._expression(0))
            token = self._advance()
            if token.is_op(")"):
                return args, positions
            if token.kind == "end":
                raise RankingExpressionError("unclosed '('", opening.pos)
            if not token.is_op(","):
                raise RankingExpressionError(f"unexpected {token.show()}", token.pos)


def _number(token: _Token) -> _Num:
    value = float(token.text)
    if value > LIMIT:
        raise RankingExpressionError(f"number {token.text} is out of range", token.pos)
    return _Num(value)


def _height(token: _Token, args: list[_Node] | tuple[_Node, ...]) -> int:
    """The height of a node over ``args``; raises where it gets too deep."""
    height = 1 + max((arg.height for arg in args), default=0)
    if height > MAX_DEPTH:
        raise RankingExpressionError(f"expression nested deeper than {MAX_DEPTH}", token.pos)
    return height


def _op(token: _Token, *args: _Node) -> _Op:
    op = token.text
    if op == "-" and len(args) == 1:
        op = "neg"
    return _Op(op, args, _height(token, args))


def _check_arity(name: _Token, count: int) -> None:
    fewest, most = _ARITY[name.text]
    if fewest <= count and (most is None or count <= most):
        return
    if most is None:
        wanted = f"at least {fewest}"
    elif fewest == most:
        wanted = f"{fewest}"
    else:
        wanted = f"{fewest} to {most}"
    plural = "" if (most or fewest) == 1 else "s"
    raise RankingExpressionError(
        f"{name.text}() takes {wanted} argument{plural}, got {count}", name.pos
    )


def _check_decay_constants(args: list[_Node], positions: list[int]) -> None:
    """A constant scale must be positive, a constant decay strictly within (0, 1)."""
    scale = _constant(args[1])
    if scale is not None and not scale > 0.0:
        raise RankingExpressionError("decay scale must be > 0", positions[1])
    if len(args) == 4:
        decay = _constant(args[3])
        if decay is not None and not 0.0 < decay < 1.0:
            raise RankingExpressionError("decay must be between 0 and 1", positions[3])


def _constant(node: _Node) -> float | None:
    """The value of ``node`` if it uses no variable (and no weight), else None."""
    if not _is_constant(node):
        return None
    code = _Builder({}, {}).build(node)
    return code if isinstance(code, float) else None


def _is_constant(node: _Node) -> bool:
    if isinstance(node, _Num):
        return True
    if isinstance(node, _Op | _Call):
        return all(_is_constant(arg) for arg in node.args)
    return False


def _walk(node: _Node) -> list[_Node]:
    found: list[_Node] = [node]
    if isinstance(node, _Op | _Call):
        for arg in node.args:
            found += _walk(arg)
    return found


# -- closures -----------------------------------------------------------------
#
# Each builder takes closures and returns one. Within a closure `v` is the
# values mapping and `w` the verb. The arithmetic ones come in three shapes,
# closure-closure, closure-constant and constant-closure, so that a constant
# operand costs nothing per call.


def _clamp(r: float) -> float:
    """``r`` brought back within ±LIMIT (NaN becomes 0.0)."""
    if -LIMIT <= r <= LIMIT:
        return r
    if r > 0.0:
        return LIMIT
    return -LIMIT if r < 0.0 else 0.0


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


# -- columns ------------------------------------------------------------------
#
# The same tree compiled a second time, for Scorer.score_many. Within a column
# closure `c` maps each variable read to its cleaned column (a list of the n
# values, brought within range as _variable brings one) and `w` is the verbs;
# it returns a list of n numbers. Closures are only ever called with n >= 1.
#
# Bit-for-bit equality with __call__ rests on one rule: each element is the
# same Python expression on the same operands as in the closure above it
# (``x + k`` where _add_k has ``a(v, w) + k``, ``-k`` added where _sub_k
# adds it). Ints included: a variable holding an int keeps it, as _variable
# does, so int arithmetic stays exact here as there. Constants are folded by
# the closures above, as _fold folds them, and a constant operand is never a
# list: the shapes take it as a float (``x * 2`` is one comprehension) or,
# elsewhere, as ``itertools.repeat``.
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
