"""A reader's rules in the pure core: what mutes, blocks and keyword filters hide."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.core.rules import Context, KeywordFilter, Mute, Rules, searchable

ALL = frozenset(Context)


def item(actor: str = "bob", **extra: Any) -> dict[str, Any]:
    return {"actor": actor, "verb": "post", "object": "photo:1", "target": None, "extra": extra}


#: (keywords, whole word, activity extra, hidden)
KEYWORDS = [
    (["finale"], True, {"t": "The FINALE!"}, True),
    (["finale"], True, {"t": "finales"}, False),
    (["finale"], False, {"t": "finales"}, True),
    (["big game"], True, {"t": "the Big  Game"}, False),  # two spaces: not the phrase
    (["big game"], True, {"t": "the big game tonight"}, True),
    (["big game"], True, {"t": "big gamer"}, False),
    (["c++"], True, {"t": "I like C++ a lot"}, True),
    (["c++"], True, {"t": "c+++"}, True),  # ends at a non-word character
    (["straße"], True, {"t": "STRASSE"}, True),  # case folding
    (["spoiler"], True, {"nested": {"deep": ["a", "Spoiler"]}}, True),
    (["photo"], True, {}, True),  # the object is searched too
    (["post"], True, {}, True),  # and the verb
    (["nothing"], True, {"n": 1, "b": True}, False),
]


@pytest.mark.parametrize(("keywords", "whole", "extra", "hidden"), KEYWORDS)
def test_keyword_filters(
    keywords: list[str], whole: bool, extra: dict[str, Any], hidden: bool
) -> None:
    rules = Rules(filters=(KeywordFilter("f", tuple(keywords), whole, ALL),))
    assert rules.hides(item(**extra), Context.TIMELINE, 0) is hidden


def test_filters_apply_in_their_contexts_until_they_expire() -> None:
    f = KeywordFilter("f", ("x",), True, frozenset({Context.NOTIFICATION}), until_ms=100)
    rules = Rules(filters=(f,))
    assert rules.hides(item(t="x"), Context.NOTIFICATION, 99)
    assert not rules.hides(item(t="x"), Context.TIMELINE, 99)
    assert not rules.hides(item(t="x"), Context.NOTIFICATION, 100)


def test_many_filters_are_one_matcher() -> None:
    filters = tuple(
        KeywordFilter(str(n), (f"kw{n}", f"other phrase {n}"), True, ALL) for n in range(100)
    )
    rules = Rules(filters=filters)
    assert rules.hides(item(t="an other phrase 42 here"), Context.TIMELINE, 0)
    assert not rules.hides(item(t="an other phrase 420"), Context.TIMELINE, 0)
    assert rules.hides(item(t="kw99"), Context.TIMELINE, 0)


@pytest.mark.parametrize(
    ("mute", "context", "now", "hidden"),
    [
        (Mute("bob"), Context.TIMELINE, 0, True),
        (Mute("bob", notifications=False), Context.NOTIFICATION, 0, False),
        (Mute("bob", notifications=False), Context.TIMELINE, 0, True),
        (Mute("bob", until_ms=10), Context.TIMELINE, 9, True),
        (Mute("bob", until_ms=10), Context.TIMELINE, 10, False),
        (Mute("carol"), Context.TIMELINE, 0, False),
    ],
)
def test_mutes(mute: Mute, context: Context, now: int, hidden: bool) -> None:
    assert Rules(muted={mute.target: mute}).hides(item(), context, now) is hidden


def test_blocks_hide_everywhere_and_enriched_actors_count() -> None:
    rules = Rules(blocked=frozenset({"bob"}))
    for context in Context:
        assert rules.hides(item(), context, 0)
    assert rules.hides({**item(), "actor": {"id": "bob", "handle": "Bob"}}, Context.TIMELINE, 0)
    assert Rules().empty
    assert not rules.empty


def test_searchable_text() -> None:
    text = searchable(
        {"verb": "Post", "object": "A", "target": None, "extra": {"x": ["B", 1], "y": "C"}}
    )
    assert sorted(text.split("\n")) == ["a", "b", "c", "post"]
