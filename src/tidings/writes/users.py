"""Users and objects: created, changed, removed, looked up.

Handles are claimed in the canonical store (one winner per normalised
handle); reserved handles (``reserved_handles``, compared normalised) are
refused here. A user's counts are the counts of its feeds: follows of its
profile feed (``<profile_group>:<id>``) by home feeds, follows made by its
home feed (``<home_group>:<id>``) and activities published into its profile
feed. Home feeds on both sides, so a user who follows from their timeline
and their aggregated and ranked timelines counts once on each side; a user's
home following their own profile (so their posts show in their timeline)
counts on neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.canonical.store import CanonicalStore
from tidings.core.clock import Clock
from tidings.core.errors import ValidationError
from tidings.core.results import FeedStats
from tidings.core.users import (
    HandleTaken,
    ObjectNotFound,
    StoredObject,
    User,
    UserNotFound,
    check_document,
    check_handle,
    check_object_ref,
    check_user_id,
    handle_key,
)


class UserWrites:
    def __init__(
        self,
        canonical: CanonicalStore,
        clock: Clock,
        *,
        reserved: frozenset[str],
        keep_seconds: float,
        profile_group: str,
        home_group: str,
    ) -> None:
        self.store = canonical.users
        self.clock = clock
        self.reserved = frozenset(handle_key(h) for h in reserved)
        self.keep_ms = int(keep_seconds * 1000)
        self.profile_group = profile_group
        self.home_group = home_group

    def _handle(self, handle: object) -> str:
        checked = check_handle(handle)
        if handle_key(checked) in self.reserved:
            raise HandleTaken(f"handle {checked!r} is reserved")
        return checked

    def create(self, user_id: str, handle: str, profile: Mapping[str, Any] | None = None) -> User:
        user = User(
            check_user_id(user_id),
            self._handle(handle),
            check_document(profile, "profile"),
            self.clock.us(),
            self.clock.us(),
        )
        return self.store.create(user, self.clock.ms(), self.keep_ms)

    def get(self, user_id: str) -> User:
        found = self.store.get(check_user_id(user_id))
        if found is None:
            raise UserNotFound(f"no user with id {user_id!r}")
        return found

    def by_handle(self, handle: str) -> User:
        if not isinstance(handle, str) or not handle:
            raise ValidationError("must be a non-empty string", field="handle")
        found = self.store.by_handle(handle, self.clock.ms(), self.keep_ms)
        if found is None:
            raise UserNotFound(f"no user with handle {handle[:64]!r}")
        return found

    def update(
        self,
        user_id: str,
        *,
        handle: str | None = None,
        profile: Mapping[str, Any] | None = None,
    ) -> User:
        return self.store.update(
            check_user_id(user_id),
            handle=None if handle is None else self._handle(handle),
            profile=None if profile is None else check_document(profile, "profile"),
            now_us=self.clock.us(),
            keep_ms=self.keep_ms,
        )

    def delete(self, user_id: str) -> User:
        return self.store.delete(check_user_id(user_id), self.clock.ms())

    def counts(self, user_id: str) -> dict[str, int]:
        """``followers`` (home feeds following the user's profile feed: people,
        not feeds, and not the user), ``following`` (not counting the user's
        own profile) and ``activities`` of a user."""
        profile = f"{self.profile_group}:{user_id}"
        home = f"{self.home_group}:{user_id}"
        followers, following = self.store.people_counts(profile, home)
        user = self.store.get(user_id)
        if user is not None and user.replaced_us is not None:
            # A re-created id: only what was published since is this user's.
            published = self.store.activities_from(profile, user.first_id)
        else:
            published = self.store.stats([profile])[profile].activities
        return {"followers": followers, "following": following, "activities": published}

    def stats(self, feed: str) -> FeedStats:
        return self.store.stats([feed])[feed]

    # -- objects --------------------------------------------------------------------

    def put_object(
        self, kind: str, object_id: str, data: Mapping[str, Any] | None, user: str | None = None
    ) -> tuple[StoredObject, bool]:
        kind, object_id = check_object_ref(kind, object_id)
        now = self.clock.us()
        return self.store.put_object(
            StoredObject(kind, object_id, check_document(data, "data"), now, now), user
        )

    def get_object(self, kind: str, object_id: str) -> StoredObject:
        kind, object_id = check_object_ref(kind, object_id)
        found = self.store.get_objects([f"{kind}:{object_id}"]).get(f"{kind}:{object_id}")
        if found is None:  # never stored, or deleted
            raise ObjectNotFound(f"no object {kind}:{object_id}")
        return found

    def delete_object(self, kind: str, object_id: str, user: str | None = None) -> None:
        kind, object_id = check_object_ref(kind, object_id)
        if not self.store.delete_object(f"{kind}:{object_id}", self.clock.us(), user):
            raise ObjectNotFound(f"no object {kind}:{object_id}")
