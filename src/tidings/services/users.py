"""Users (unique handles, profiles, exact counts) and the objects activities
refer to (``photo:17`` and its JSON data)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.results import FeedStats
from tidings.core.users import StoredObject, User
from tidings.writes.users import UserWrites


class UserService:
    """``feeds.users``: create, find, rename and delete users; their counts."""

    def __init__(self, users: UserWrites, feed_groups: Mapping[str, FeedGroup]) -> None:
        self._users = users
        self._feed_groups = feed_groups

    def create(self, user_id: str, handle: str, profile: Mapping[str, Any] | None = None) -> User:
        """A new user. Handles are unique after NFKC, case folding and the
        folding of look-alikes, and their letters are of one script: a second
        claim raises :class:`HandleTaken` (so does a reserved handle, and the
        id of a user deleted within ``handle_keep_seconds``)."""
        return self._users.create(user_id, handle, profile)

    def get(self, user_id: str) -> User:
        return self._users.get(user_id)

    def by_handle(self, handle: str) -> User:
        """The user holding ``handle`` (in any case, width or look-alike), or
        who gave it up within ``handle_keep_seconds``."""
        return self._users.by_handle(handle)

    def update(
        self,
        user_id: str,
        *,
        handle: str | None = None,
        profile: Mapping[str, Any] | None = None,
    ) -> User:
        """Rename (the old handle keeps resolving for ``handle_keep_seconds``)
        and/or replace the profile."""
        return self._users.update(user_id, handle=handle, profile=profile)

    def delete(self, user_id: str) -> User:
        """Delete a user: reads enriching its activities show a tombstone, and
        its id is not created again within ``handle_keep_seconds``."""
        return self._users.delete(user_id)

    def counts(self, user_id: str) -> dict[str, int]:
        """``followers``, ``following`` and ``activities`` of a user, exact."""
        return self._users.counts(user_id)

    def feed_stats(self, feed: str) -> FeedStats:
        """Followers, following and activities published of a feed, exact."""
        parse_feed_id(feed, self._feed_groups)
        return self._users.stats(feed)


class ObjectService:
    """``feeds.objects``: what activities refer to as ``kind:id``, stored for
    enrichment (a deleted one reads as a tombstone)."""

    def __init__(self, users: UserWrites) -> None:
        self._users = users

    def put(
        self,
        kind: str,
        object_id: str,
        data: Mapping[str, Any] | None,
        *,
        user: str | None = None,
    ) -> tuple[StoredObject, bool]:
        """Store ``kind:object_id``; and whether it is new. ``user``: the user
        writing it, who owns it if new and may change only what it owns
        (NotObjectOwner); None: the application, which may change any."""
        return self._users.put_object(kind, object_id, data, user)

    def get(self, kind: str, object_id: str) -> StoredObject:
        return self._users.get_object(kind, object_id)

    def delete(self, kind: str, object_id: str, *, user: str | None = None) -> None:
        """Delete an object (``user`` as for :meth:`put`)."""
        self._users.delete_object(kind, object_id, user)
