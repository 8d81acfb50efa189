"""A reader's own rules: whom they mute or block, and what their keyword
filters hide (Mastodon's mutes, blocks and filters v2).

Rules hide activities from what their owner reads; they delete nothing, so
unmuting shows the history again. A mute may expire and may spare
notifications; a filter applies in the contexts it names (timeline,
notification, firehose) and may expire. Blocks are always on, everywhere.

Pure: the canonical store keeps the rules, the read side asks
:meth:`Rules.hides` of each activity it is about to show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tidings.core.activity import check_text
from tidings.core.errors import TidingsError, ValidationError
from tidings.core.limits import MAX_REF_LENGTH
from tidings.core.users import check_user_id

MAX_MUTES = 10_000
MAX_BLOCKS = 10_000
MAX_FILTERS = 300
MAX_KEYWORDS = 100
MAX_KEYWORD_LENGTH = 100
#: Longest mute or filter duration: ten years.
MAX_DURATION_S = 10 * 365 * 86_400


class Context(StrEnum):
    TIMELINE = "timeline"
    NOTIFICATION = "notification"
    FIREHOSE = "firehose"


class Blocked(TidingsError):
    """A follow between two users one of whom blocks the other. HTTP 403."""


@dataclass(frozen=True, slots=True)
class Mute:
    target: str
    #: When it ends (ms); None: never.
    until_ms: int | None = None
    #: Whether it hides the target's notifications too.
    notifications: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "until_ms": self.until_ms,
            "notifications": self.notifications,
        }


@dataclass(frozen=True, slots=True)
class KeywordFilter:
    id: str
    keywords: tuple[str, ...]
    whole_word: bool = True
    contexts: frozenset[Context] = frozenset(Context)
    until_ms: int | None = None
    #: What a match does; ``hide`` is the one action.
    action: str = "hide"

    @property
    def source(self) -> str:
        """The regular expression of its keywords (case-folded)."""
        alternatives = "|".join(re.escape(k.casefold()) for k in self.keywords)
        return rf"(?<!\w)(?:{alternatives})(?!\w)" if self.whole_word else f"(?:{alternatives})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "keywords": list(self.keywords),
            "whole_word": self.whole_word,
            "contexts": sorted(c.value for c in self.contexts),
            "until_ms": self.until_ms,
            "action": self.action,
        }


def searchable(item: Mapping[str, Any]) -> str:
    """What filters read of an activity: verb, object, target and the string
    values of ``extra`` (nested too), case-folded, one per line."""
    parts: list[str] = []
    for key in ("verb", "object", "target"):
        value = item.get(key)
        if isinstance(value, str):
            parts.append(value)
    stack: list[Any] = [item.get("extra") or {}]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return "\n".join(parts).casefold()


_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Seen:
    """What rules read of an activity: its actor, and its searchable text
    (:func:`searchable`) with the set of its words."""

    actor: str | None
    text: str
    words: frozenset[str]


def seen(item: Mapping[str, Any]) -> Seen:
    actor = item.get("actor")
    if isinstance(actor, Mapping):  # enriched
        actor = actor.get("id")
    text = searchable(item)
    return Seen(actor if isinstance(actor, str) else None, text, frozenset(_WORD.findall(text)))


@dataclass(frozen=True, slots=True)
class _Matcher:
    """The keywords of the filters in force in one context, sorted by how they
    are found: whole single words by set lookup, phrases (and keywords with
    other characters) by a search once their first word is there, substrings
    with ``in``. So a hundred filters cost about what one does."""

    words: frozenset[str]
    #: Phrases by their first word: only those whose first word an activity
    #: holds are searched for.
    phrases: Mapping[str, tuple[re.Pattern[str], ...]]
    anywhere: tuple[re.Pattern[str], ...]
    substrings: tuple[str, ...]

    @classmethod
    def of(cls, filters: Sequence[KeywordFilter]) -> _Matcher:
        words: set[str] = set()
        phrases: dict[str, tuple[re.Pattern[str], ...]] = {}
        anywhere: list[re.Pattern[str]] = []
        substrings: list[str] = []
        for f in filters:
            for keyword in f.keywords:
                key = keyword.casefold()
                if not f.whole_word:
                    substrings.append(key)
                elif _WORD.fullmatch(key):
                    words.add(key)
                else:
                    rx = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
                    first = _WORD.search(key)
                    if first is not None and first.start() == 0:
                        phrases[first.group()] = (*phrases.get(first.group(), ()), rx)
                    else:
                        anywhere.append(rx)
        return cls(frozenset(words), phrases, tuple(anywhere), tuple(substrings))

    def matches(self, s: Seen) -> bool:
        if not self.words.isdisjoint(s.words):
            return True
        if self.phrases:
            for first in s.words.intersection(self.phrases):
                if any(rx.search(s.text) for rx in self.phrases[first]):
                    return True
        if any(rx.search(s.text) for rx in self.anywhere):
            return True
        return any(sub in s.text for sub in self.substrings)


@dataclass(frozen=True)
class Rules:
    """One user's rules, as read from the store at one time."""

    muted: Mapping[str, Mute] = field(default_factory=dict)
    blocked: frozenset[str] = frozenset()
    filters: tuple[KeywordFilter, ...] = ()
    #: The filters in force per context, sorted for matching, with when that
    #: set next changes (a filter expires).
    _matchers: dict[Context, tuple[int, _Matcher | None]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def empty(self) -> bool:
        return not (self.muted or self.blocked or self.filters)

    def hides(self, item: Mapping[str, Any], context: Context, now_ms: int) -> bool:
        """Whether the owner of these rules should not see ``item`` (an activity
        in its JSON shape) in ``context``."""
        return self.hides_seen(seen(item), context, now_ms)

    def hides_seen(self, s: Seen, context: Context, now_ms: int) -> bool:
        """:meth:`hides`, of what :func:`seen` read of an activity."""
        actor = s.actor
        if actor is not None:
            if actor in self.blocked:
                return True
            mute = self.muted.get(actor)
            if mute is not None and _mutes(mute, context, now_ms):
                return True
        if self.filters:
            matcher = self._matcher(context, now_ms)
            if matcher is not None and matcher.matches(s):
                return True
        return False

    def _matcher(self, context: Context, now_ms: int) -> _Matcher | None:
        cached = self._matchers.get(context)
        if cached is not None and now_ms < cached[0]:
            return cached[1]
        live = [
            f
            for f in self.filters
            if context in f.contexts and (f.until_ms is None or f.until_ms > now_ms)
        ]
        ends = [f.until_ms for f in live if f.until_ms is not None]
        matcher = _Matcher.of(live) if live else None
        self._matchers[context] = (min(ends, default=2**63), matcher)
        return matcher


def _mutes(mute: Mute, context: Context, now_ms: int) -> bool:
    """Whether ``mute`` is in force now, in ``context``."""
    if mute.until_ms is not None and mute.until_ms <= now_ms:
        return False
    return context != Context.NOTIFICATION or mute.notifications


def check_target(target: object, owner: str, rule: str) -> str:
    """Whom a new mute or block (``rule``) is of: a user id (as a user's own
    is checked), and not its owner's own (muting oneself would hide one's
    own posts from oneself)."""
    checked = check_user_id(target, "target")
    if checked == owner:
        raise ValidationError(f"a user cannot {rule} themselves", field="target")
    return checked


def check_held_target(target: object) -> str:
    """Whom a mute or block to remove is of: any target that may be held (those
    stored before targets were checked as user ids can still be removed)."""
    if not isinstance(target, str) or not 1 <= len(target) <= MAX_REF_LENGTH:
        raise ValidationError(f"must be a user id of 1-{MAX_REF_LENGTH} characters", field="target")
    check_text(target, "target")
    return target


def check_duration(duration_s: object, now_ms: int) -> int | None:
    """``duration_s`` (seconds; None: forever) to when it ends."""
    if duration_s is None:
        return None
    if isinstance(duration_s, bool) or not isinstance(duration_s, int | float):
        raise ValidationError("must be a number of seconds", field="duration_s")
    if not 1 <= duration_s <= MAX_DURATION_S:
        raise ValidationError(f"must be from 1 to {MAX_DURATION_S:,} seconds", field="duration_s")
    return now_ms + int(duration_s * 1000)


def check_keywords(keywords: object) -> tuple[str, ...]:
    if isinstance(keywords, str) or not isinstance(keywords, Sequence) or not keywords:
        raise ValidationError("must be a non-empty list of keywords", field="keywords")
    if len(keywords) > MAX_KEYWORDS:
        raise ValidationError(
            f"{len(keywords)} keywords; the limit is {MAX_KEYWORDS}", field="keywords"
        )
    out: list[str] = []
    for i, k in enumerate(keywords):
        if not isinstance(k, str) or not k.strip() or len(k) > MAX_KEYWORD_LENGTH:
            raise ValidationError(
                f"must be a keyword of 1-{MAX_KEYWORD_LENGTH} characters", field=f"keywords.{i}"
            )
        check_text(k, f"keywords.{i}")
        out.append(k.strip())
    return tuple(dict.fromkeys(out))


def check_contexts(contexts: object) -> frozenset[Context]:
    if contexts is None:
        return frozenset(Context)
    if isinstance(contexts, str) or not isinstance(contexts, Iterable):
        raise ValidationError("must be a list of contexts", field="contexts")
    out: set[Context] = set()
    for c in contexts:
        try:
            out.add(Context(c))
        except ValueError:
            allowed = ", ".join(x.value for x in Context)
            raise ValidationError(
                f"unknown context {str(c)[:32]!r}; allowed: {allowed}", field="contexts"
            ) from None
    if not out:
        raise ValidationError("must name at least one context", field="contexts")
    return frozenset(out)
