"""Mutes, blocks and keyword filters: set, listed, and looked up for reads.

A user's rules are read once and kept in this process for
``rules_cache_seconds`` (a change made here replaces them at once), so
enforcing them costs no round trip per page. A block refuses new follows
between the two users and returns their follows of each other that it
ended; the rule service (:mod:`tidings.services.rules`) unfollows those, with
what they delivered.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence

from tidings.canonical.recheck import Recheck
from tidings.canonical.store import CanonicalStore
from tidings.core.activity import check_text
from tidings.core.clock import Clock
from tidings.core.errors import ValidationError
from tidings.core.feeds import FeedGroup
from tidings.core.rules import (
    MAX_BLOCKS,
    MAX_FILTERS,
    MAX_MUTES,
    KeywordFilter,
    Mute,
    Rules,
    check_contexts,
    check_duration,
    check_held_target,
    check_keywords,
    check_target,
)
from tidings.core.users import check_user_id

#: The rules of a user who has none.
NO_RULES = Rules()
#: Rules looked up for this many users at most; then the cache starts over.
CACHED_USERS = 100_000


class UserRules:
    def __init__(
        self,
        canonical: CanonicalStore,
        clock: Clock,
        feed_groups: Mapping[str, FeedGroup],
        *,
        cache_seconds: float,
    ) -> None:
        self.store = canonical.rules
        self.clock = clock
        self.feed_groups = feed_groups
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Rules]] = {}
        # Most deployments have no rules at all: then reads skip the per-user
        # lookups (and their store reads every cache period) altogether.
        self._any = Recheck(self.store.any_rules, cache_seconds, clock.monotonic)
        #: Bumped by each change made here: a read that began before one does
        #: not cache what it read.
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()

    def rules(self, user_id: str) -> Rules:
        """``user_id``'s rules, from this process's cache when fresh."""
        return self.rules_many([user_id])[user_id]

    def rules_many(self, user_ids: Iterable[str]) -> dict[str, Rules]:
        """The rules of several users: those cached, and the others in one batch."""
        if not self._any():
            return dict.fromkeys(user_ids, NO_RULES)
        now = self.clock.monotonic()
        out: dict[str, Rules] = {}
        missing: list[str] = []
        for user in user_ids:
            hit = self._cache.get(user)
            if hit is not None and hit[0] > now:
                out[user] = hit[1]
            else:
                missing.append(user)
        if missing:
            with self._lock:
                seen = {u: self._generation.get(u, 0) for u in missing}
            found = self.store.rules_many(missing, self.clock.ms())
            with self._lock:
                if len(self._cache) >= CACHED_USERS:
                    self._cache.clear()
                for user, rules in found.items():
                    # A change made here while we read must not be undone by
                    # caching what we read before it.
                    if self._generation.get(user, 0) == seen[user]:
                        self._cache[user] = (now + self.cache_seconds, rules)
            out.update(found)
        return out

    def cached(self, user_id: str) -> bool:
        """Whether ``user_id``'s rules are known here without a store read."""
        if not self._any():
            return True
        hit = self._cache.get(user_id)
        return hit is not None and hit[0] > self.clock.monotonic()

    def _changed(self, user_id: str) -> None:
        with self._lock:
            self._cache.pop(user_id, None)
            self._generation[user_id] = self._generation.get(user_id, 0) + 1
        self._any.expire()

    def _live(self, user_id: str) -> Rules:
        """The rules in force now, from the store (for listings and limits)."""
        return self.store.rules(check_user_id(user_id), self.clock.ms())

    # -- mutes ----------------------------------------------------------------------

    def mute(
        self,
        user_id: str,
        target: str,
        *,
        duration_s: float | None = None,
        notifications: bool = True,
    ) -> Mute:
        check_user_id(user_id)
        if not isinstance(notifications, bool):
            raise ValidationError("must be true or false", field="notifications")
        mute = Mute(
            check_target(target, user_id, "mute"),
            check_duration(duration_s, self.clock.ms()),
            notifications,
        )
        held = self._live(user_id).muted
        if mute.target not in held and len(held) >= MAX_MUTES:
            raise ValidationError(
                f"{MAX_MUTES:,} mutes already; the limit is {MAX_MUTES:,}", field="target"
            )
        self.store.mute(user_id, mute, self.clock.ms())
        self._changed(user_id)
        return mute

    def unmute(self, user_id: str, target: str) -> bool:
        done = self.store.unmute(check_user_id(user_id), check_held_target(target))
        self._changed(user_id)
        return done

    def mutes(self, user_id: str) -> list[Mute]:
        """The mutes in force now (expired ones are gone)."""
        return sorted(self._live(user_id).muted.values(), key=lambda m: m.target)

    # -- blocks ---------------------------------------------------------------------

    def block(self, user_id: str, target: str) -> list[tuple[str, str]]:
        """Block ``target``: no new follow between them can be made; returns
        their follows of each other that this ended, ``(follower, source)``,
        for the caller to take out what they delivered."""
        check_target(target, check_user_id(user_id), "block")
        if len(self._live(user_id).blocked) >= MAX_BLOCKS:
            raise ValidationError(f"the limit is {MAX_BLOCKS:,} blocks", field="target")
        feeds_of = {u: [f"{g}:{u}" for g in self.feed_groups] for u in (user_id, target)}
        ended = self.store.block(user_id, target, self.clock.ms(), feeds_of)
        self._changed(user_id)
        return ended

    def unblock(self, user_id: str, target: str) -> bool:
        done = self.store.unblock(check_user_id(user_id), check_held_target(target))
        self._changed(user_id)
        return done

    def blocks(self, user_id: str) -> list[str]:
        return sorted(self._live(user_id).blocked)

    # -- filters --------------------------------------------------------------------

    def add_filter(
        self,
        user_id: str,
        keywords: Sequence[str],
        *,
        whole_word: bool = True,
        contexts: Iterable[str] | None = None,
        duration_s: float | None = None,
    ) -> KeywordFilter:
        check_user_id(user_id)
        if not isinstance(whole_word, bool):
            raise ValidationError("must be true or false", field="whole_word")
        made = KeywordFilter(
            id=secrets.token_hex(16),
            keywords=check_keywords(keywords),
            whole_word=whole_word,
            contexts=check_contexts(contexts),
            until_ms=check_duration(duration_s, self.clock.ms()),
        )
        if len(self._live(user_id).filters) >= MAX_FILTERS:
            raise ValidationError(f"the limit is {MAX_FILTERS} filters", field="keywords")
        self.store.add_filter(user_id, made, self.clock.ms())
        self._changed(user_id)
        return made

    def delete_filter(self, user_id: str, filter_id: str) -> bool:
        check_text(str(filter_id), "filter_id")
        done = self.store.delete_filter(check_user_id(user_id), str(filter_id))
        self._changed(user_id)
        return done

    def filters(self, user_id: str) -> list[KeywordFilter]:
        """The filters in force now (expired ones are gone)."""
        return list(self._live(user_id).filters)
