"""Ranking expressions: the grammar, every function, the total runtime
semantics (nothing raises, nothing non-finite escapes) and the errors."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.core.errors import ValidationError
from tidings.core.ranking import (
    LIMIT,
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    RankingExpression,
    RankingExpressionError,
    Scorer,
    decay_exp,
    decay_gauss,
    decay_linear,
    recency_score,
)

EXAMPLE = (
    "decay_exp(age_hours, 24) * (1 + ln(1 + likes + 2*comments)) * weight(verb) * (1 + affinity)"
)


def score(
    text: str,
    values: Mapping[str, float] | None = None,
    verb: str = "",
    **compile_args: Mapping[str, float],
) -> float:
    return RankingExpression.parse(text).compile(**compile_args)(values or {}, verb)


# -- the grammar --------------------------------------------------------------

NUMBERS = [
    ("12", 12.0),
    ("1.5", 1.5),
    (".5", 0.5),
    ("1.", 1.0),
    ("1e3", 1000.0),
    ("2.5E-2", 0.025),
    ("1e+2", 100.0),
    ("0", 0.0),
]


@pytest.mark.parametrize(("text", "expected"), NUMBERS, ids=[t for t, _ in NUMBERS])
def test_numbers(text: str, expected: float) -> None:
    assert score(text) == expected


PRECEDENCE = [
    ("mul-over-add", "1 + 2 * 3", 7.0),
    ("parens", "(1 + 2) * 3", 9.0),
    ("sub-left-assoc", "10 - 4 - 3", 3.0),
    ("div-left-assoc", "48 / 4 / 2", 6.0),
    ("mixed-mul-div", "8 / 2 * 4", 16.0),
    ("pow-right-assoc", "2 ^ 3 ^ 2", 512.0),
    ("pow-over-neg", "-2 ^ 2", -4.0),
    ("neg-in-parens", "(-2) ^ 2", 4.0),
    ("neg-exponent", "2 ^ -1", 0.5),
    ("neg-exponent-chain", "2 ^ -1 ^ 2", 0.5),
    ("pow-over-mul", "2 * 3 ^ 2", 18.0),
    ("pow-then-mul", "2 ^ 3 * 2", 16.0),
    ("neg-over-mul", "-3 * 2", -6.0),
    ("neg-operand", "2 * -3", -6.0),
    ("double-neg", "- -3", 3.0),
    ("minus-minus", "1 - -1", 2.0),
    ("unary-plus", "+3", 3.0),
    ("plus-minus", "+-3", -3.0),
    ("add-over-compare", "1 + 2 < 4", 1.0),
    ("compare-over-not", "not 1 < 0", 1.0),
    ("not-over-and", "not 0 and 0", 0.0),
    ("and-over-or", "1 or 0 and 0", 1.0),
    ("and-then-or", "0 and 1 or 1", 1.0),
    ("not-not", "not not 3", 1.0),
    ("parenthesised-compare", "(1 < 2) < 3", 1.0),
    ("whitespace", " \t1\n+\r\n2 ", 3.0),
    ("no-whitespace", "2*3+1", 7.0),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in PRECEDENCE], ids=[c[0] for c in PRECEDENCE]
)
def test_precedence_and_associativity(text: str, expected: float) -> None:
    assert score(text) == pytest.approx(expected)


# Each operator with constants (folded at compile time) and with variables
# (a closure): both must agree, as must the shapes with one constant side.
ARITHMETIC = [
    ("add", "+", 3.0, 4.0, 7.0),
    ("sub", "-", 3.0, 4.0, -1.0),
    ("mul", "*", 3.0, 4.0, 12.0),
    ("div", "/", 3.0, 4.0, 0.75),
    ("pow", "^", 3.0, 4.0, 81.0),
    ("lt-true", "<", 3.0, 4.0, 1.0),
    ("lt-false", "<", 4.0, 4.0, 0.0),
    ("le", "<=", 4.0, 4.0, 1.0),
    ("gt-true", ">", 5.0, 4.0, 1.0),
    ("gt-false", ">", 4.0, 4.0, 0.0),
    ("ge", ">=", 4.0, 4.0, 1.0),
    ("ge-false", ">=", 3.0, 4.0, 0.0),
    ("eq", "==", 4.0, 4.0, 1.0),
    ("eq-false", "==", 3.0, 4.0, 0.0),
    ("ne", "!=", 3.0, 4.0, 1.0),
    ("ne-false", "!=", 4.0, 4.0, 0.0),
    ("and-both", "and", 2.0, -1.0, 1.0),
    ("and-one", "and", 2.0, 0.0, 0.0),
    ("or-one", "or", 0.0, 0.5, 1.0),
    ("or-none", "or", 0.0, 0.0, 0.0),
    ("div-by-zero", "/", 3.0, 0.0, 0.0),
    ("zero-div", "/", 0.0, 3.0, 0.0),
    ("add-overflow", "+", 1e300, 1e300, LIMIT),
    ("sub-overflow", "-", -1e300, 1e300, -LIMIT),
    ("mul-overflow", "*", 1e300, 1e300, LIMIT),
    ("mul-overflow-negative", "*", -1e300, 1e300, -LIMIT),
    ("div-overflow", "/", 1e300, 1e-300, LIMIT),
    ("div-overflow-negative", "/", 1e300, -1e-300, -LIMIT),
    ("pow-overflow", "^", 10.0, 400.0, LIMIT),
    ("pow-overflow-odd-negative", "^", -10.0, 401.0, -LIMIT),
    ("pow-overflow-even-negative", "^", -10.0, 400.0, LIMIT),
    ("pow-beyond-limit", "^", 10.0, 301.0, LIMIT),
    ("pow-complex", "^", -8.0, 1 / 3, 0.0),
    ("pow-zero-negative", "^", 0.0, -1.0, 0.0),
    ("pow-zero-zero", "^", 0.0, 0.0, 1.0),
]


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"), [c[1:] for c in ARITHMETIC], ids=[c[0] for c in ARITHMETIC]
)
@pytest.mark.parametrize("shape", ["constants", "variables", "left-constant", "right-constant"])
def test_binary_operators(op: str, a: float, b: float, expected: float, shape: str) -> None:
    left = repr(a) if shape in ("constants", "left-constant") else "a"
    right = repr(b) if shape in ("constants", "right-constant") else "b"
    # repr(-8.0) is "-8.0": the parentheses keep -8 ^ x from meaning -(8 ^ x).
    result = score(f"({left}) {op} ({right})", {"a": a, "b": b})
    assert result == pytest.approx(expected)
    assert type(result) is float


FUNCTIONS = [
    ("ln-e", "ln(X)", math.e, 1.0),
    ("ln-1", "ln(X)", 1.0, 0.0),
    ("ln-0", "ln(X)", 0.0, 0.0),
    ("ln-negative", "ln(X)", -1.0, 0.0),
    ("log-1000", "log(X)", 1000.0, 3.0),
    ("log-0", "log(X)", 0.0, 0.0),
    ("log-negative", "log(X)", -5.0, 0.0),
    ("exp-0", "exp(X)", 0.0, 1.0),
    ("exp-1", "exp(X)", 1.0, math.e),
    ("exp-overflow", "exp(X)", 1000.0, LIMIT),
    ("exp-underflow", "exp(X)", -1000.0, 0.0),
    ("neg-exp-overflow", "-exp(X)", 1000.0, -LIMIT),
    ("abs-negative", "abs(X)", -2.5, 2.5),
    ("abs-positive", "abs(X)", 2.5, 2.5),
    ("min-one", "min(X)", 3.0, 3.0),
    ("min-two", "min(X, 1)", 3.0, 1.0),
    ("min-two-other", "min(1, X)", 0.5, 0.5),
    ("min-many", "min(3, X, 2, 5)", 1.0, 1.0),
    ("max-one", "max(X)", 3.0, 3.0),
    ("max-two", "max(X, 1)", 3.0, 3.0),
    ("max-two-other", "max(X, 4)", 3.0, 4.0),
    ("max-many", "max(3, X, 2, 5)", 1.0, 5.0),
]


@pytest.mark.parametrize(
    ("text", "x", "expected"), [c[1:] for c in FUNCTIONS], ids=[c[0] for c in FUNCTIONS]
)
def test_functions(text: str, x: float, expected: float) -> None:
    assert score(text, {"X": x}) == pytest.approx(expected)
    # The same with X a constant, so folded at compile time.
    assert score(text.replace("X", f"({x!r})")) == pytest.approx(expected)


DECAYS = [
    # name, x, scale, offset, decay, expected
    ("exp-at-0", "decay_exp", 0.0, 10.0, 0.0, 0.5, 1.0),
    ("exp-negative-x", "decay_exp", -5.0, 10.0, 0.0, 0.5, 1.0),
    ("exp-at-scale", "decay_exp", 10.0, 10.0, 0.0, 0.5, 0.5),
    ("exp-at-2-scales", "decay_exp", 20.0, 10.0, 0.0, 0.5, 0.25),
    ("exp-within-offset", "decay_exp", 4.0, 10.0, 5.0, 0.5, 1.0),
    ("exp-at-offset", "decay_exp", 5.0, 10.0, 5.0, 0.5, 1.0),
    ("exp-at-offset-plus-scale", "decay_exp", 15.0, 10.0, 5.0, 0.3, 0.3),
    ("linear-at-0", "decay_linear", 0.0, 10.0, 0.0, 0.5, 1.0),
    ("linear-half-scale", "decay_linear", 5.0, 10.0, 0.0, 0.5, 0.75),
    ("linear-at-scale", "decay_linear", 10.0, 10.0, 0.0, 0.5, 0.5),
    ("linear-at-offset-plus-scale", "decay_linear", 12.0, 10.0, 2.0, 0.2, 0.2),
    ("linear-floor", "decay_linear", 100.0, 10.0, 0.0, 0.5, 0.0),
    ("linear-negative-x", "decay_linear", -3.0, 10.0, 0.0, 0.5, 1.0),
    ("gauss-at-0", "decay_gauss", 0.0, 10.0, 0.0, 0.5, 1.0),
    ("gauss-at-scale", "decay_gauss", 10.0, 10.0, 0.0, 0.5, 0.5),
    ("gauss-at-2-scales", "decay_gauss", 20.0, 10.0, 0.0, 0.5, 0.0625),
    ("gauss-at-offset", "decay_gauss", 3.0, 10.0, 3.0, 0.5, 1.0),
    ("gauss-at-offset-plus-scale", "decay_gauss", 13.0, 10.0, 3.0, 0.8, 0.8),
    ("gauss-negative-x", "decay_gauss", -30.0, 10.0, 0.0, 0.5, 1.0),
    ("gauss-far", "decay_gauss", 1e300, 1e-300, 0.0, 0.5, 0.0),
    ("exp-far", "decay_exp", 1e300, 1e-300, 0.0, 0.5, 0.0),
    ("linear-far", "decay_linear", 1e300, 1e-300, 0.0, 0.5, 0.0),
]
DECAY_IDS = [c[0] for c in DECAYS]
DECAY_FUNCTIONS = {"decay_exp": decay_exp, "decay_linear": decay_linear, "decay_gauss": decay_gauss}


@pytest.mark.parametrize(
    ("name", "x", "scale", "offset", "decay", "expected"), [c[1:] for c in DECAYS], ids=DECAY_IDS
)
def test_decay_functions(
    name: str, x: float, scale: float, offset: float, decay: float, expected: float
) -> None:
    assert DECAY_FUNCTIONS[name](x, scale, offset, decay) == pytest.approx(expected)
    constants = f"{name}(x, {scale!r}, {offset!r}, {decay!r})"
    assert score(constants, {"x": x}) == pytest.approx(expected)
    variables = f"{name}(x, s, o, d)"
    values = {"x": x, "s": scale, "o": offset, "d": decay}
    assert score(variables, values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("decay_exp(x, 10)", 0.5),
        ("decay_exp(x, 5, 5)", 0.5),
        ("decay_linear(x, 10)", 0.5),
        ("decay_gauss(x, 20, 0, 0.25)", 0.25**0.25),
    ],
    ids=["exp-defaults", "exp-offset-only", "linear-defaults", "gauss-all"],
)
def test_decay_optional_arguments(text: str, expected: float) -> None:
    assert score(text, {"x": 10.0}) == pytest.approx(expected)


RUNTIME_DECAY_PARAMETERS = [
    # scale, decay, expected for x = 10 (scale and decay given as variables)
    ("zero-scale", 0.0, 0.5, 0.0),
    ("negative-scale", -1.0, 0.5, 0.0),
    ("decay-above-1", 10.0, 2.0, 1.0),
    ("decay-1", 10.0, 1.0, 1.0),
    ("decay-0", 10.0, 0.0, 0.0),
    ("decay-negative", 10.0, -0.5, 0.0),
]


@pytest.mark.parametrize(
    ("scale", "decay", "expected"),
    [c[1:] for c in RUNTIME_DECAY_PARAMETERS],
    ids=[c[0] for c in RUNTIME_DECAY_PARAMETERS],
)
@pytest.mark.parametrize("name", sorted(DECAY_FUNCTIONS))
def test_runtime_decay_parameters_are_total(
    name: str, scale: float, decay: float, expected: float
) -> None:
    assert score(f"{name}(x, s, 0, d)", {"x": 10.0, "s": scale, "d": decay}) == expected
    assert DECAY_FUNCTIONS[name](10.0, scale, 0.0, decay) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((math.nan, 1.0), 0.0),
        ((1.0, math.nan), 0.0),
        ((math.inf, 1.0), 0.0),
        ((math.inf, 1.0, math.inf), 0.0),
        ((20.0, 10.0, 0.0, math.nan), 0.0),  # NaN decay counts as 0
    ],
    ids=["nan-x", "nan-scale", "inf-x", "inf-minus-inf", "nan-decay"],
)
@pytest.mark.parametrize("name", sorted(DECAY_FUNCTIONS))
def test_decay_functions_keep_nan_out(name: str, args: tuple[float, ...], expected: float) -> None:
    assert DECAY_FUNCTIONS[name](*args) == expected


# -- if, and, or: laziness ----------------------------------------------------


class Recording(dict[str, float]):
    """Values that remember which names were looked up."""

    def __init__(self, values: Mapping[str, float]) -> None:
        super().__init__(values)
        self.read: list[str] = []

    def get(self, key: str, default: float | None = None) -> float | None:  # type: ignore[override]
        self.read.append(key)
        return super().get(key, default)


LAZY = [
    ("if-true", "if(c, a, b)", {"c": 1.0, "a": 2.0, "b": 3.0}, 2.0, ["c", "a"]),
    ("if-false", "if(c, a, b)", {"c": 0.0, "a": 2.0, "b": 3.0}, 3.0, ["c", "b"]),
    ("if-negative-is-true", "if(c, a, b)", {"c": -0.5, "a": 2.0, "b": 3.0}, 2.0, ["c", "a"]),
    ("if-missing-is-false", "if(c, a, b)", {"a": 2.0, "b": 3.0}, 3.0, ["c", "b"]),
    ("if-untaken-division", "if(c, a, 1 / b)", {"c": 1.0, "a": 2.0, "b": 0.0}, 2.0, ["c", "a"]),
    ("if-constant-condition", "if(1, a, b)", {"a": 2.0, "b": 3.0}, 2.0, ["a"]),
    ("and-short-circuits", "c and a", {"c": 0.0, "a": 2.0}, 0.0, ["c"]),
    ("and-reads-both", "c and a", {"c": 1.0, "a": 2.0}, 1.0, ["c", "a"]),
    ("or-short-circuits", "c or a", {"c": 3.0, "a": 0.0}, 1.0, ["c"]),
    ("or-reads-both", "c or a", {"c": 0.0, "a": 0.0}, 0.0, ["c", "a"]),
]


@pytest.mark.parametrize(
    ("text", "values", "expected", "read"), [c[1:] for c in LAZY], ids=[c[0] for c in LAZY]
)
def test_only_the_branch_taken_is_evaluated(
    text: str, values: dict[str, float], expected: float, read: list[str]
) -> None:
    recording = Recording(values)
    assert score(text, recording) == expected
    assert recording.read == read


# -- variables, defaults, weights ---------------------------------------------

VARIABLES = [
    ("given", "x + y", {"x": 1.0, "y": 2.0}, {}, 3.0),
    ("missing-is-zero", "x + y", {"x": 1.0}, {}, 1.0),
    ("missing-takes-default", "x + y", {"x": 1.0}, {"y": 5.0}, 6.0),
    ("given-beats-default", "x + y", {"x": 1.0, "y": 2.0}, {"y": 5.0}, 3.0),
    ("extra-name", "extra.boost * 2", {"extra.boost": 1.5}, {}, 3.0),
    ("extra-default", "extra.boost * 2", {}, {"extra.boost": 4.0}, 8.0),
    ("plain-extra", "extra + 1", {"extra": 1.0}, {}, 2.0),
    ("ints", "likes * comments + 1", {"likes": 3, "comments": 2}, {}, 7.0),
    ("bool", "flag + 1", {"flag": True}, {}, 2.0),
    ("none-takes-default", "x + 1", {"x": None}, {"x": 2.0}, 3.0),
    ("string-takes-default", "x + 1", {"x": "3"}, {}, 1.0),
    ("nan-is-zero", "x + 1", {"x": math.nan}, {}, 1.0),
    ("inf-clamps", "x", {"x": math.inf}, {}, LIMIT),
    ("minus-inf-clamps", "x", {"x": -math.inf}, {}, -LIMIT),
    ("inf-minus-inf", "x - y", {"x": math.inf, "y": math.inf}, {}, 0.0),
    ("inf-times-zero", "x * 0", {"x": math.inf}, {}, 0.0),
    ("huge-int-clamps", "x", {"x": 10**400}, {}, LIMIT),
    ("huge-negative-int-clamps", "x", {"x": -(10**400)}, {}, -LIMIT),
    ("int-product-clamps", "x * x", {"x": 10**200}, {}, LIMIT),
    ("underscore-name", "_a1 + B_2", {"_a1": 1.0, "B_2": 2.0}, {}, 3.0),
]


@pytest.mark.parametrize(
    ("text", "values", "defaults", "expected"),
    [c[1:] for c in VARIABLES],
    ids=[c[0] for c in VARIABLES],
)
def test_variables_and_defaults(
    text: str, values: dict[str, float], defaults: dict[str, float], expected: float
) -> None:
    result = score(text, values, defaults=defaults)
    assert result == pytest.approx(expected)
    assert type(result) is float


WEIGHTS = [
    ("known-verb", "like", 2.5),
    ("other-verb", "share", 0.5),
    ("missing-verb", "comment", 1.0),
    ("no-verb", "", 1.0),
]


@pytest.mark.parametrize(
    ("verb", "expected"), [c[1:] for c in WEIGHTS], ids=[c[0] for c in WEIGHTS]
)
def test_weights(verb: str, expected: float) -> None:
    weights = {"like": 2.5, "share": 0.5}
    assert score("weight(verb)", {}, verb, weights=weights) == expected
    assert score("2 * weight(verb) + 1", {}, verb, weights=weights) == 2 * expected + 1


def test_without_weights_every_verb_weighs_one() -> None:
    assert score("weight(verb) * 3", {}, "like") == 3.0


def test_weights_and_defaults_are_copied() -> None:
    weights = {"like": 2.0}
    defaults = {"x": 1.0}
    scorer = RankingExpression.parse("weight(verb) + x").compile(weights=weights, defaults=defaults)
    weights["like"] = 10.0
    defaults["x"] = 10.0
    assert scorer({}, "like") == 3.0


@pytest.mark.parametrize(
    ("weights", "defaults"),
    [
        ({"like": math.nan}, {}),
        ({"like": math.inf}, {}),
        ({"like": "2"}, {}),
        ({}, {"x": math.nan}),
        ({}, {"x": None}),
    ],
    ids=["nan-weight", "inf-weight", "string-weight", "nan-default", "none-default"],
)
def test_weights_and_defaults_must_be_finite_numbers(
    weights: dict[str, float], defaults: dict[str, float]
) -> None:
    with pytest.raises(ValidationError, match="must be a finite number"):
        RankingExpression.parse("x * weight(verb)").compile(weights=weights, defaults=defaults)


# -- the example, explain, variables ------------------------------------------


def test_the_example() -> None:
    scorer = RankingExpression.parse(EXAMPLE).compile(
        weights={"like": 1.5}, defaults={"affinity": 0.1}
    )
    values = {"age_hours": 24.0, "likes": 3, "comments": 2}
    expected = 0.5 * (1 + math.log(8)) * 1.5 * 1.1
    assert scorer(values, "like") == pytest.approx(expected)
    assert scorer.explain(values, "like") == {
        "score": pytest.approx(expected),
        "affinity": 0.1,
        "age_hours": 24.0,
        "comments": 2.0,
        "likes": 3.0,
        "weight(verb)": 1.5,
    }


EXPLAIN = [
    ("plain", "x * 2", {"x": 3.0}, "", {"score": 6.0, "x": 3.0}),
    ("default-shown", "x + y", {"x": 1.0}, "", {"score": 3.0, "x": 1.0, "y": 2.0}),
    ("cleaned-shown", "x", {"x": math.nan}, "", {"score": 0.0, "x": 0.0}),
    ("folded-away-shown", "if(0, x, 1)", {"x": 4.0}, "", {"score": 1.0, "x": 4.0}),
    ("weight", "weight(verb)", {}, "like", {"score": 2.0, "weight(verb)": 2.0}),
    ("constant", "1 + 2", {}, "", {"score": 3.0}),
]


@pytest.mark.parametrize(
    ("text", "values", "verb", "expected"),
    [c[1:] for c in EXPLAIN],
    ids=[c[0] for c in EXPLAIN],
)
def test_explain(
    text: str, values: dict[str, float], verb: str, expected: dict[str, float]
) -> None:
    scorer = RankingExpression.parse(text).compile(weights={"like": 2.0}, defaults={"y": 2.0})
    explained = scorer.explain(values, verb)
    assert explained == expected
    assert next(iter(explained)) == "score"


USED = [
    ("example", EXAMPLE, {"age_hours", "likes", "comments", "affinity", "verb"}, True),
    ("extra", "extra.boost + x", {"extra.boost", "x"}, False),
    ("constant", "1 + 2", set(), False),
    ("repeated", "x * x + x", {"x"}, False),
    ("weight-only", "weight(verb)", {"verb"}, True),
    ("inside-if", "if(a, b, c)", {"a", "b", "c"}, False),
]


@pytest.mark.parametrize(
    ("text", "variables", "uses_weight"), [c[1:] for c in USED], ids=[c[0] for c in USED]
)
def test_variables_and_uses_weight(text: str, variables: set[str], uses_weight: bool) -> None:
    expression = RankingExpression.parse(text)
    assert expression.variables == frozenset(variables)
    assert expression.uses_weight is uses_weight
    assert expression.text == text


def test_expressions_compare_by_text_and_compile_when_built_by_hand() -> None:
    parsed = RankingExpression.parse("x + 1")
    by_hand = RankingExpression("x + 1", frozenset({"x"}), False)
    assert parsed == by_hand
    assert hash(parsed) == hash(by_hand)
    assert by_hand.compile()({"x": 2.0}) == 3.0


def test_a_scorer_is_reusable_and_says_what_it_scores() -> None:
    scorer = RankingExpression.parse("x * 2").compile()
    assert isinstance(scorer, Scorer)
    assert [scorer({"x": float(i)}) for i in range(3)] == [0.0, 2.0, 4.0]
    assert repr(scorer) == "Scorer('x * 2')"


# -- recency ------------------------------------------------------------------


def test_recency_score_orders_like_time() -> None:
    times = [0, 1, 1_700_000_000_000, 1_700_000_000_001, 4_102_444_800_000]
    scores = [recency_score(t) for t in times]
    assert scores == sorted(scores)
    assert len(set(scores)) == len(scores)


@pytest.mark.parametrize("half_life_hours", [1.0, 24.0, 168.0], ids=["hour", "day", "week"])
def test_recency_score_gains_ln2_per_half_life(half_life_hours: float) -> None:
    now = 1_700_000_000_000
    later = now + int(half_life_hours * 3_600_000)
    gained = recency_score(later, half_life_hours) - recency_score(now, half_life_hours)
    assert gained == pytest.approx(math.log(2))


@pytest.mark.parametrize("half_life_hours", [0.0, -1.0, math.nan, math.inf])
def test_recency_score_needs_a_positive_half_life(half_life_hours: float) -> None:
    with pytest.raises(ValidationError, match="half_life_hours"):
        recency_score(0, half_life_hours)


# -- errors -------------------------------------------------------------------

ERRORS = [
    ("empty", "", 0, "empty expression"),
    ("blank", "   ", 0, "empty expression"),
    ("dangling-operator", "1 +", 3, "unexpected end of input"),
    ("unexpected-close", "(likes + 2) * 3)", 15, "unexpected ')'"),
    ("trailing-number", "1 2", 2, "unexpected '2'"),
    ("trailing-name", "x y", 2, "unexpected 'y'"),
    ("unclosed-paren", "(1 + 2", 0, "unclosed '('"),
    ("unclosed-inner-paren", "1 * (2 * (3)", 4, "unclosed '('"),
    ("unclosed-call", "ln(1", 2, "unclosed '('"),
    ("unclosed-call-args", "min(1, 2", 3, "unclosed '('"),
    ("wrong-in-parens", "(1 2)", 3, "unexpected '2'"),
    ("trailing-comma", "min(1,)", 6, "unexpected ')'"),
    ("leading-comma", "min(,1)", 4, "unexpected ','"),
    ("comma-in-parens", "(1, 2)", 2, "unexpected ','"),
    ("empty-parens", "()", 1, "unexpected ')'"),
    ("unknown-function", "x + foo(1)", 4, "unknown function 'foo'"),
    ("unknown-dotted-function", "extra.f(1)", 0, "unknown function 'extra.f'"),
    ("ln-arity", "ln(1, 2)", 0, "ln() takes 1 argument, got 2"),
    ("exp-no-args", "exp()", 0, "exp() takes 1 argument, got 0"),
    ("min-no-args", "min()", 0, "min() takes at least 1 argument, got 0"),
    ("max-no-args", "max()", 0, "max() takes at least 1 argument, got 0"),
    ("decay-too-few", "decay_exp(1)", 0, "decay_exp() takes 2 to 4 arguments, got 1"),
    ("decay-too-many", "decay_gauss(1, 2, 3, 0.5, 5)", 0, "takes 2 to 4 arguments, got 5"),
    ("if-arity", "if(1, 2)", 0, "if() takes 3 arguments, got 2"),
    ("if-without-call", "if + 1", 0, "unexpected 'if'"),
    ("function-as-variable", "ln + 1", 0, "'ln' is a function"),
    ("weight-as-variable", "2 * weight", 4, "'weight' is a function"),
    ("verb-alone", "verb", 0, "'verb' may only be used as weight(verb)"),
    ("verb-in-arithmetic", "1 + verb", 4, "weight(verb)"),
    ("verb-in-function", "ln(verb)", 3, "weight(verb)"),
    ("verb-as-function", "verb(1)", 0, "unknown function 'verb'"),
    ("weight-of-other", "weight(x)", 7, "weight() takes exactly the name verb"),
    ("weight-of-number", "weight(1)", 7, "weight() takes exactly the name verb"),
    ("weight-of-expression", "weight(verb + 1)", 7, "weight(verb)"),
    ("weight-of-negation", "weight(-verb)", 8, "weight(verb)"),
    ("weight-of-parenthesised", "weight((verb))", 8, "weight(verb)"),
    ("weight-no-args", "weight()", 0, "weight() takes 1 argument, got 0"),
    ("weight-two-args", "weight(verb, 1)", 0, "weight() takes 1 argument, got 2"),
    ("weight-unclosed", "weight(verb", 6, "unclosed '('"),
    ("chained-comparison", "1 < 2 < 3", 6, "comparisons cannot be chained"),
    ("chained-equality", "a == b != c", 7, "comparisons cannot be chained"),
    ("chained-after-not", "not a < b <= c", 10, "comparisons cannot be chained"),
    ("not-in-arithmetic", "1 + not 0", 4, "unexpected 'not'"),
    ("not-in-comparison", "a < not b", 4, "unexpected 'not'"),
    ("not-after-minus", "-not a", 1, "unexpected 'not'"),
    ("and-first", "and 1", 0, "unexpected 'and'"),
    ("or-last", "1 or", 4, "unexpected end of input"),
    ("not-infix", "a not b", 2, "unexpected 'not'"),
    ("keyword-as-function", "and(1)", 0, "unexpected 'and'"),
    ("constant-zero-scale", "decay_exp(x, 0)", 13, "decay scale must be > 0"),
    ("constant-negative-scale", "decay_gauss(x, -1)", 15, "decay scale must be > 0"),
    ("folded-zero-scale", "decay_linear(x, 2 - 2)", 16, "decay scale must be > 0"),
    ("constant-decay-above-1", "decay_exp(x, 1, 0, 1.5)", 19, "decay must be between 0 and 1"),
    ("constant-decay-0", "decay_exp(x, 1, 0, 0)", 19, "decay must be between 0 and 1"),
    ("bad-dotted-name", "a.b + 1", 0, "unknown dotted name 'a.b'"),
    ("doubly-dotted-name", "extra.a.b", 0, "unknown dotted name 'extra.a.b'"),
    ("dot-without-name", "extra. + 1", 0, "expected a name after 'extra.'"),
    ("dot-then-digit", "extra.5", 0, "expected a name after 'extra.'"),
    ("malformed-exponent", "1e + 2", 0, "malformed number starting '1'"),
    ("number-then-letters", "2x", 0, "malformed number"),
    ("two-dots", "1.2.3", 0, "malformed number starting '1.2'"),
    ("number-out-of-range", "1e400", 0, "number 1e400 is out of range"),
    ("number-above-limit", "x * 2e300", 4, "out of range"),
    ("stray-dot", "x + .", 4, "unexpected character '.'"),
    ("single-equals", "a = b", 2, "unexpected character '='"),
    ("bang", "!a", 0, "unexpected character '!'"),
    ("dollar", "x $ y", 2, "unexpected character '$'"),
    ("non-ascii-name", "café", 3, "unexpected character 'é'"),
    ("python-power", "2 ** 3", 3, "unexpected '*'"),
    ("too-long", "x" * (MAX_EXPRESSION_LENGTH + 1), 2000, "longer than 2000 characters"),
    ("too-many-parens", "(" * 100 + "1" + ")" * 100, 64, "nested deeper than 64"),
    ("too-many-minuses", "-" * 100 + "1", 64, "nested deeper than 64"),
    ("too-long-a-sum", "x" + "+x" * MAX_DEPTH, 127, "nested deeper than 64"),
    ("too-long-a-power", "2" + "^2" * 100, 128, "nested deeper than 64"),
]


@pytest.mark.parametrize(
    ("text", "position", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_errors(text: str, position: int, message: str) -> None:
    with pytest.raises(RankingExpressionError) as caught:
        RankingExpression.parse(text)
    err = caught.value
    assert message in str(err)
    assert err.position == position
    assert str(err).endswith(f" at position {position}")
    assert str(err).startswith("ranking: ")
    assert err.field == "ranking"
    assert isinstance(err, ValidationError)
    assert isinstance(err, ValueError)


def test_the_message_reads_well() -> None:
    with pytest.raises(RankingExpressionError) as caught:
        RankingExpression.parse("(likes + 2) * 3)")
    assert str(caught.value) == "ranking: unexpected ')' at position 15"
    assert caught.value.detail == "unexpected ')' at position 15"


@pytest.mark.parametrize(
    "text",
    [
        "x" * MAX_EXPRESSION_LENGTH,
        "(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1),
        "x" + "+x" * (MAX_DEPTH - 1),
        "-" * (MAX_DEPTH - 1) + "1",
        "ln(" * (MAX_DEPTH - 1) + "2" + ")" * (MAX_DEPTH - 1),
    ],
    ids=["longest", "deepest-parens", "longest-sum", "most-minuses", "deepest-calls"],
)
def test_the_limits_themselves_are_accepted(text: str) -> None:
    RankingExpression.parse(text).compile()({})


# -- property: evaluation is total --------------------------------------------

NAMES = ["x", "y", "age", "extra.z"]
LEAVES = st.sampled_from(["0", "1", "2.5", ".5", "1e300", "1e-300", *NAMES, "weight(verb)"])
BINARY = ["+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "and", "or"]
FUNCTION_NAMES = ["ln", "log", "exp", "abs"]
DECAY_NAMES = sorted(DECAY_FUNCTIONS)
# A constant scale or decay must be valid; a variable one may be anything.
SCALES = st.sampled_from(["1", "24", "1e-300", "1e300", *NAMES])
DECAY_RATES = st.sampled_from(["0.5", "0.01", "0.99", *NAMES])


def _grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(BINARY), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(st.sampled_from(["-", "+", "not "]), children).map(lambda t: f"({t[0]}{t[1]})"),
        st.tuples(st.sampled_from(FUNCTION_NAMES), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["min", "max"]), st.lists(children, min_size=1, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(children, children, children).map(lambda t: f"if({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(st.sampled_from(DECAY_NAMES), children, SCALES, children, DECAY_RATES).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]}, {t[3]}, {t[4]})"
        ),
    )


EXPRESSIONS = st.recursive(LEAVES, _grow, max_leaves=24)
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
VALUES = st.dictionaries(
    st.sampled_from(NAMES), st.one_of(ANY_FLOAT, st.integers(), st.booleans()), max_size=4
)


def parse_within_limits(text: str) -> RankingExpression | None:
    """The parsed text, or None if it broke a size limit (random trees can be
    too deep or too long); any other error fails the test."""
    try:
        return RankingExpression.parse(text)
    except RankingExpressionError as err:
        if "nested deeper" in str(err) or "longer than" in str(err):
            return None
        raise


@settings(max_examples=400, deadline=None, database=None)
@given(text=EXPRESSIONS, values=VALUES, verb=st.sampled_from(["", "like", "share", "huge"]))
def test_evaluation_never_raises_and_is_finite(
    text: str, values: dict[str, float], verb: str
) -> None:
    expression = parse_within_limits(text)
    if expression is None:
        return
    scorer = expression.compile(
        weights={"like": 2.0, "share": -0.5, "huge": 1e300}, defaults={"y": 3.0}
    )
    result = scorer(values, verb)
    assert type(result) is float
    assert math.isfinite(result)
    assert abs(result) <= LIMIT
    explained = scorer.explain(values, verb)
    assert explained["score"] == result
    assert all(math.isfinite(value) for value in explained.values())


# -- columns: score_many ------------------------------------------------------
#
# score_many must give, bit for bit, what a call per candidate gives. The
# expressions are those of the tables above, and some more for the column
# code's own paths (its shapes, its bounds, its folding); the columns hold
# plain numbers (the fast path, which takes a column as it is) and odd ones.


def per_item(scorer: Scorer, columns: Mapping[str, Sequence[Any]], verbs: list[str]) -> list[float]:
    """What score_many must give: a call per candidate, on the equivalent values."""
    return [
        scorer({name: column[i] for name, column in columns.items()}, verb)
        for i, verb in enumerate(verbs)
    ]


def assert_same_scores(
    scorer: Scorer, columns: Mapping[str, Sequence[Any]], verbs: list[str]
) -> None:
    scores = scorer.score_many(columns, verbs)
    assert [type(s) for s in scores] == [float] * len(verbs)
    # float.hex tells -0.0 from 0.0, which == does not.
    assert [s.hex() for s in scores] == [s.hex() for s in per_item(scorer, columns, verbs)]


def _column_expressions() -> list[tuple[str, str]]:
    cases = [(f"precedence-{c[0]}", c[1]) for c in PRECEDENCE]
    shapes = {"variables": ("a", "b"), "left-constant": (None, "b"), "right-constant": ("a", None)}
    for name, op, a, b, _ in ARITHMETIC:
        for shape, (left, right) in shapes.items():
            text = f"({left or repr(a)}) {op} ({right or repr(b)})"
            cases.append((f"arithmetic-{name}-{shape}", text))
    cases += [(f"function-{c[0]}", c[1]) for c in FUNCTIONS]
    for name, function, _, scale, offset, decay, _ in DECAYS:
        cases.append((f"decay-{name}", f"{function}(x, {scale!r}, {offset!r}, {decay!r})"))
    cases += [(f"decay-variables-{name}", f"{name}(x, s, o, d)") for name in DECAY_NAMES]
    cases += [(f"decay-defaults-{name}", f"{name}(x, 10)") for name in DECAY_NAMES]
    cases += [(f"lazy-{c[0]}", c[1]) for c in LAZY]
    cases += [(f"variables-{c[0]}", c[1]) for c in VARIABLES]
    cases += [(f"explain-{c[0]}", c[1]) for c in EXPLAIN]
    cases += [(f"used-{c[0]}", c[1]) for c in USED]
    cases += COLUMN_EXPRESSIONS
    unique: dict[str, str] = {}
    for case_id, text in cases:
        unique.setdefault(text, case_id)
    return [(case_id, text) for text, case_id in unique.items()]


COLUMN_EXPRESSIONS = [
    ("the-example", EXAMPLE),
    ("variable-alone", "x"),
    ("variable-in-min", "min(x)"),
    ("one-plus-variable", "1 + x"),
    ("int-plus-one-minus-int", "(x + 1) - x"),
    ("int-sum-minus-int", "(x + y) - y"),
    ("int-arithmetic", "x * y + x - y"),
    ("exp-plus-zero", "exp(x) + 0"),
    ("exp-times-one", "exp(x) * 1"),
    ("ln-plus-ln", "ln(x) + ln(y) * 2"),
    ("decay-times-ln", "decay_exp(x, 24) * (1 + ln(1 + y))"),
    ("variable-times-half", "x * 0.5"),
    ("variable-over-constant", "x / 3"),
    ("variable-over-tiny", "x / 1e-300"),
    ("constant-over-variable", "1 / x"),
    ("variable-over-variable", "x / y"),
    ("variable-over-zero", "x / 0"),
    ("variable-over-folded-zero", "x / (1 - 1)"),
    ("negated", "-x"),
    ("abs-negated", "abs(-x) + 1"),
    ("power-constant-exponent", "x ^ 2"),
    ("power-constant-base", "2 ^ x"),
    ("power-variables", "x ^ y"),
    ("min-of-two", "min(x, y)"),
    ("min-of-three", "min(x, y, 1)"),
    ("max-of-four", "max(2, x, y, -1)"),
    ("max-with-constant", "max(0, x)"),
    ("if-variable-branches", "if(x > y, x, y * 2)"),
    ("if-constant-branches", "if(x, 1, 2)"),
    ("if-int-branch", "if(x, y, 0.5) + 1"),
    ("if-bound-of-either-branch", "if(x, 0.5, y) * 1e300"),
    ("weight-times-huge", "weight(verb) * 1e300"),
    ("and-constant", "x and 1"),
    ("or-constant", "0 or x"),
    ("not-variable", "not x"),
    ("int-equals-float", "x == y"),
    ("compare-constant", "x >= 1e300"),
    ("weight-times-variable", "weight(verb) * x"),
    ("weight-plus-one", "weight(verb) + 1"),
    ("decay-variable-offset", "decay_exp(x, 10, y)"),
    ("decay-linear-variable-decay", "decay_linear(x, 10, 0, y)"),
    ("decay-gauss-constant-x", "decay_gauss(5, x)"),
    # Without weights, weight(verb) is 1: the scale folds to 0, the decay to 1.
    ("decay-folded-zero-scale", "decay_exp(x, weight(verb) - 1)"),
    ("decay-linear-folded-decay-1", "decay_linear(x, 10, 0, weight(verb))"),
]
COLUMN_CASES = _column_expressions()


class FloatSubclass(float):
    """A float that is not exactly a float, as numpy's scalars are not."""


# Plain numbers within range: score_many takes such columns as they are.
PLAIN_FLOATS = [0.0, -0.0, 1.0, -1.0, 2.5, -3.75, 0.5, 24.0, 1e-300, -1e-300, 1e300, -1e300]
PLAIN_FLOATS += [1e150, math.log(LIMIT) - 1e-13, 690.0, 1e-5]
PLAIN_INTS = [0, 1, -1, 2, 3, -7, 24, 10**300, -(10**300), int(LIMIT), -int(LIMIT), 2**53 + 1]
PLAIN_INTS += [10**150, 690, 691]
# Anything else: None, NaN, infinities, ints beyond range, bools, strings...
ODD_VALUES = [None, math.nan, math.inf, -math.inf, 10**400, -(10**400), True, False, "7", b"1"]
ODD_VALUES += [1e308, -1e308, int(LIMIT) + 1, FloatSubclass(2.5), 0.0, -2.0, 3, 1e300]
COLUMN_POOLS: dict[str, list[Any]] = {
    "plain-floats": PLAIN_FLOATS,
    "plain-ints": PLAIN_INTS,
    "plain-mixed": PLAIN_FLOATS[::2] + PLAIN_INTS[::2],
    "odd": ODD_VALUES,
}
VERBS = ["like", "share", "", "comment", "huge"]
COMPILED = {
    "weighted": {
        "weights": {"like": 2.5, "share": -0.5, "huge": 1e300},
        "defaults": {"y": 3.0, "x": -2.0, "c": 1.0, "affinity": 0.1},
    },
    "plain": {},
}


def pooled_columns(names: list[str], pool: list[Any]) -> dict[str, list[Any]]:
    """A column per name over every pair of pool values for the first two names
    (and a stride through the pool for the others)."""
    p = len(pool)
    return {
        name: [
            pool[i % p if j == 0 else i // p if j == 1 else (i * j + j) % p] for i in range(p * p)
        ]
        for j, name in enumerate(names)
    }


@pytest.mark.parametrize(
    "columns_kind",
    [*COLUMN_POOLS, "odd-some-missing", "plain-tuples", "all-missing"],
)
@pytest.mark.parametrize("compiled", sorted(COMPILED))
@pytest.mark.parametrize("text", [c[1] for c in COLUMN_CASES], ids=[c[0] for c in COLUMN_CASES])
def test_score_many_is_a_call_per_candidate(text: str, compiled: str, columns_kind: str) -> None:
    expression = RankingExpression.parse(text)
    scorer = expression.compile(**COMPILED[compiled])
    names = sorted(expression.variables - {"verb"})
    pool = COLUMN_POOLS.get(columns_kind.removesuffix("-some-missing"), PLAIN_FLOATS)
    columns: dict[str, Sequence[Any]] = dict(pooled_columns(names, pool))
    n = len(pool) ** 2
    if columns_kind == "odd-some-missing":
        columns = {name: column for j, (name, column) in enumerate(columns.items()) if j % 2}
    elif columns_kind == "plain-tuples":
        columns = {name: tuple(column) for name, column in columns.items()}
    elif columns_kind == "all-missing":
        columns = {}
    verbs = [VERBS[i % len(VERBS)] for i in range(n)]
    assert_same_scores(scorer, columns, verbs)


# Plain numbers, but not all of them within range: they pass the type test
# of score_many's fast path, and each fails one of its other tests.
NEARLY_PLAIN_POOLS: dict[str, list[Any]] = {
    "nan-among-floats": [0.0, 2.5, -1.0, math.nan],
    "infinities": [0.0, 1.5, math.inf, -math.inf],
    "float-above-limit": [0.0, -2.5, 2e300],
    "float-below-limit": [0.0, 2.5, -2e300],
    "floats-beyond-limit": [0.0, -0.0, 1e300, 1e308, -1e308],
    "int-above-limit": [0, -3, int(LIMIT) + 1],
    "int-below-limit": [0, 3, -int(LIMIT) - 1],
    "int-beyond-floats": [0, 3, 10**400],
    "int-beyond-floats-with-floats": [0.0, 3.5, 10**400],
    "ints-and-floats-beyond-limit": [0, 1.5, 10**300, -1e308, math.nan, -(10**400)],
}


@pytest.mark.parametrize("pool", list(NEARLY_PLAIN_POOLS.values()), ids=list(NEARLY_PLAIN_POOLS))
@pytest.mark.parametrize("text", ["x", "x * y", "(x + 1) - x", "min(x, y)", EXAMPLE], ids=str)
def test_score_many_reads_nearly_plain_columns_as_a_call_does(text: str, pool: list[Any]) -> None:
    expression = RankingExpression.parse(text)
    scorer = expression.compile(**COMPILED["weighted"])
    columns = pooled_columns(sorted(expression.variables - {"verb"}), pool)
    verbs = [VERBS[i % len(VERBS)] for i in range(len(pool) ** 2)]
    assert_same_scores(scorer, columns, verbs)


@pytest.mark.parametrize(
    "text", ["1 + 2", "x", "min(x)", "weight(verb)", "if(x, y, 2)", EXAMPLE], ids=str
)
def test_score_many_of_no_candidates_is_empty(text: str) -> None:
    scorer = RankingExpression.parse(text).compile(weights={"like": 2.0})
    assert scorer.score_many({}, []) == []
    assert scorer.score_many({"x": [], "y": []}, []) == []


def test_score_many_gives_a_new_list_and_leaves_the_columns_alone() -> None:
    column = [1.0, 2.0]
    for text in ["x", "min(x)", "x * 2"]:
        scores = RankingExpression.parse(text).compile().score_many({"x": column}, ["", ""])
        assert scores is not column
        scores.append(5.0)
        assert column == [1.0, 2.0]


def test_score_many_ignores_columns_it_does_not_read() -> None:
    scorer = RankingExpression.parse("x + 1").compile()
    assert scorer.score_many({"x": [1.0, 2], "unused": [None]}, ["", ""]) == [2.0, 3.0]


def test_score_many_wants_a_column_per_candidate() -> None:
    scorer = RankingExpression.parse("x + y").compile()
    with pytest.raises(ValueError, match="column 'y' has 1 values for 2 verbs"):
        scorer.score_many({"x": [1.0, 2.0], "y": [1.0]}, ["", ""])


ANY_VALUE = st.one_of(
    ANY_FLOAT,
    st.integers(),
    st.booleans(),
    st.none(),
    st.sampled_from([10**300, -(10**300), 10**400, int(LIMIT) + 1, 2**53 + 1, "3"]),
)
PLAIN_VALUE = st.one_of(st.floats(-LIMIT, LIMIT), st.integers(-(10**300), 10**300))


@st.composite
def candidates(draw: st.DrawFn) -> tuple[dict[str, list[Any]], list[str]]:
    """Columns of 0 to 20 candidates (some names absent, some columns plain,
    the others anything), and their verbs."""
    n = draw(st.integers(0, 20))
    verbs = draw(st.lists(st.sampled_from(VERBS), min_size=n, max_size=n))
    columns = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True)):
        values = draw(st.sampled_from([ANY_VALUE, PLAIN_VALUE]))
        columns[name] = draw(st.lists(values, min_size=n, max_size=n))
    return columns, verbs


@settings(max_examples=400, deadline=None, database=None)
@given(text=EXPRESSIONS, given_candidates=candidates())
def test_score_many_is_a_call_per_candidate_for_any_expression(
    text: str, given_candidates: tuple[dict[str, list[Any]], list[str]]
) -> None:
    expression = parse_within_limits(text)
    if expression is None:
        return
    scorer = expression.compile(**COMPILED["weighted"])
    columns, verbs = given_candidates
    assert_same_scores(scorer, columns, verbs)
