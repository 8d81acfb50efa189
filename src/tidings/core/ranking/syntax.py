"""The syntax of ranking expressions: the tokenizer, the precedence-climbing
(Pratt) parser, the checks made while parsing, and the error they raise."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from tidings.core.errors import ValidationError
from tidings.core.ranking.functions import LIMIT
from tidings.core.ranking.scalar import _Builder
from tidings.core.ranking.tree import _Call, _Node, _Num, _Op, _Var, _VerbRef

#: Longest expression text accepted, in characters.
MAX_EXPRESSION_LENGTH: Final = 2000
#: Deepest nesting accepted: of parentheses and calls while parsing, and of the
#: tree itself (``a+b+c+...`` is a tree as deep as it is long). It bounds the
#: recursion of the parser, of compilation and of every evaluation.
MAX_DEPTH: Final = 64


class RankingExpressionError(ValidationError):
    """A ranking expression is malformed; ``position`` is the 0-based offset of
    the offending token in the text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}", field="ranking")
        self.position = position


# -- tokens -------------------------------------------------------------------


class _TokenKind(StrEnum):
    """What a token of an expression is (each the name of its pattern's group)."""

    SPACE = "space"  # between tokens, dropped
    NUM = "num"
    NAME = "name"
    #: An operator, a parenthesis or comma, or one of the keywords and, or, not.
    OP = "op"
    END = "end"  # after the last token


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN = re.compile(
    rf"""
    (?P<{_TokenKind.SPACE}>\s+)
  | (?P<{_TokenKind.NUM}>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<{_TokenKind.NAME}>{_NAME}(?:\.{_NAME})*)
  | (?P<{_TokenKind.OP}><=|>=|==|!=|[-+*/^<>(),])
    """,
    re.VERBOSE,
)
# A number running straight into one of these is malformed ("1e", "2x", "1.2.3").
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]")
_KEYWORD_OPERATORS: Final = frozenset({"and", "or", "not"})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: _TokenKind
    text: str
    pos: int

    def show(self) -> str:
        return "end of input" if self.kind == _TokenKind.END else f"'{self.text}'"

    def is_op(self, text: str) -> bool:
        return self.kind == _TokenKind.OP and self.text == text


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise RankingExpressionError(f"unexpected character {text[pos]!r}", pos)
        kind = _TokenKind(match.lastgroup or "")  # (every alternative is a named group)
        word = match.group()
        if kind == _TokenKind.NUM:
            if _NUMBER_TAIL.match(text, match.end()):
                raise RankingExpressionError(f"malformed number starting {word!r}", pos)
        elif kind == _TokenKind.NAME:
            _check_name(text, word, pos, match.end())
            if word in _KEYWORD_OPERATORS:
                kind = _TokenKind.OP
        if kind != _TokenKind.SPACE:
            tokens.append(_Token(kind, word, pos))
        pos = match.end()
    tokens.append(_Token(_TokenKind.END, "", len(text)))
    return tokens


def _check_name(text: str, word: str, pos: int, end: int) -> None:
    """Only ``extra.NAME`` may be dotted, and a name may not end in a dot."""
    if text.startswith(".", end):
        raise RankingExpressionError(f"expected a name after '{word}.'", pos)
    if "." in word and (word.count(".") > 1 or not word.startswith("extra.")):
        raise RankingExpressionError(f"unknown dotted name {word!r} (only extra.NAME)", pos)


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
        if self._peek().kind == _TokenKind.END:
            raise RankingExpressionError("empty expression", 0)
        node = self._expression(0)
        token = self._peek()
        if token.kind != _TokenKind.END:
            raise RankingExpressionError(f"unexpected {token.show()}", token.pos)
        return node

    def _peek(self) -> _Token:
        return self._tokens[self._i]

    def _advance(self) -> _Token:
        token = self._tokens[self._i]
        if token.kind != _TokenKind.END:
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
            bind = _INFIX.get(token.text, 0) if token.kind == _TokenKind.OP else 0
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
        if token.kind == _TokenKind.NUM:
            return _number(token)
        if token.kind == _TokenKind.NAME:
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
        if token.kind == _TokenKind.END:
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
        is_verb = start.kind == _TokenKind.NAME and start.text == "verb"
        if is_verb and after.kind == _TokenKind.END:
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
            if token.kind == _TokenKind.END:
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
