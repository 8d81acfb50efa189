"""A user's rules over what they see: mutes, blocks and keyword filters.
What the rules hide, and from whom, is :mod:`tidings.services.access`'s."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tidings.core.rules import KeywordFilter, Mute
from tidings.writes.follows import FollowWrites
from tidings.writes.rules import UserRules


class RuleService:
    """``feeds.rules``: mute, block and filter, and list what is in force."""

    def __init__(self, rules: UserRules, follows: FollowWrites) -> None:
        self._rules = rules
        self._follows = follows

    def mute(
        self,
        user_id: str,
        target: str,
        *,
        duration_s: float | None = None,
        notifications: bool = True,
    ) -> Mute:
        """``user_id`` stops seeing ``target``'s activities (in notifications too,
        unless ``notifications`` is False), for ``duration_s`` (None: until
        unmuted). Nothing is deleted: unmuting shows them again."""
        return self._rules.mute(user_id, target, duration_s=duration_s, notifications=notifications)

    def unmute(self, user_id: str, target: str) -> bool:
        return self._rules.unmute(user_id, target)

    def mutes(self, user_id: str) -> list[Mute]:
        """The mutes of ``user_id`` in force now."""
        return self._rules.mutes(user_id)

    def block(self, user_id: str, target: str) -> None:
        """``user_id`` blocks ``target``: hidden everywhere, follows between their
        feeds end both ways (with what they delivered), and new ones are refused."""
        for follower, source in self._rules.block(user_id, target):
            self._follows.unfollow(follower, source, keep_history=False)

    def unblock(self, user_id: str, target: str) -> bool:
        return self._rules.unblock(user_id, target)

    def blocks(self, user_id: str) -> list[str]:
        return self._rules.blocks(user_id)

    def add_filter(
        self,
        user_id: str,
        keywords: Sequence[str],
        *,
        whole_word: bool = True,
        contexts: Iterable[str] | None = None,
        duration_s: float | None = None,
    ) -> KeywordFilter:
        """Hide activities holding any of ``keywords`` (case-insensitive; whole
        words unless ``whole_word`` is False) in verb, object, target or the
        strings of extra, in ``contexts`` (default: timeline, notification,
        firehose), for ``duration_s`` (None: until deleted)."""
        return self._rules.add_filter(
            user_id, keywords, whole_word=whole_word, contexts=contexts, duration_s=duration_s
        )

    def delete_filter(self, user_id: str, filter_id: str) -> bool:
        return self._rules.delete_filter(user_id, filter_id)

    def filters(self, user_id: str) -> list[KeywordFilter]:
        return self._rules.filters(user_id)
