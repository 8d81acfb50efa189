"""Users, their handles, and objects, in the canonical store.

A handle is held by its key (NFKC + casefold + confusable skeleton,
:func:`tidings.core.users.handle_key`) in ``tidings_handles``, whose primary
key gives a claim race one winner. A rename (or a deletion) releases the old
key: it keeps resolving to its user, and nobody else may claim it, for
``keep_ms`` after. A deleted user's id is kept as long.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.exc import IntegrityError

from tidings.canonical.counts import CountsCache, NoCountsCache
from tidings.canonical.db import Database
from tidings.canonical.rows import chunks
from tidings.canonical.schema import activities, feed_stats, follows, handles, objects, users
from tidings.core.results import FeedStats
from tidings.core.users import (
    HandleTaken,
    NotObjectOwner,
    StoredObject,
    User,
    UserNotFound,
    handle_key,
)


class Users:
    """Users and their handles; objects; each feed's counts."""

    def __init__(self, db: Database, counts_cache: CountsCache | None = None) -> None:
        self.db = db
        #: Where :meth:`stats` looks first (Redis when configured); the writes
        #: that move counts call :meth:`forget` after committing.
        self.counts_cache: CountsCache = counts_cache or NoCountsCache()

    def forget(self, feeds: Sequence[str]) -> None:
        """Counts of ``feeds`` just moved (committed): drop their cached entries."""
        self.counts_cache.forget(sorted(set(feeds)))

    def prepare_forget(self, feeds: Sequence[str]) -> Callable[[], Any]:
        """:meth:`forget` encoded now, done when called (see ``send_together``)."""
        return self.counts_cache.prepare_forget(sorted(set(feeds)))

    # -- users ----------------------------------------------------------------------

    def create(self, user: User, now_ms: int, keep_ms: int) -> User:
        """Store a new user, claiming its handle; :class:`HandleTaken` when the id
        or the handle is someone else's, or the id a user's deleted within
        ``keep_ms``. After that the id starts clean: what was published under
        it before stays the deleted user's (``replaced_us``)."""
        try:
            with self.db.write() as conn:
                replaced = self._replaced(conn, user.id, now_ms, keep_ms)
                self._claim(conn, user.id, user.handle, now_ms, keep_ms)
                # A deleted user's tombstone gives way to the new one.
                conn.execute(delete(users).where(users.c.id == user.id))
                conn.execute(
                    users.insert().values(
                        id=user.id,
                        handle=user.handle,
                        profile=orjson.dumps(dict(user.profile)),
                        created_us=user.created_us,
                        updated_us=user.updated_us,
                        replaced_us=replaced,
                    )
                )
        except IntegrityError:
            # PostgreSQL: a concurrent claim of the same handle (or id) committed
            # between our look and our insert.
            raise HandleTaken(
                f"handle {user.handle!r} or user id {user.id!r} was just taken"
            ) from None
        return dataclasses.replace(user, replaced_us=replaced)

    def _replaced(self, conn: Connection, user_id: str, now_ms: int, keep_ms: int) -> int | None:
        """When the user who had ``user_id`` before was deleted (None: nobody
        had it); :class:`HandleTaken` while someone has it, or had it within
        ``keep_ms`` (a re-created id would take over the deleted user's
        followers' trust and what was published under it)."""
        u = users.c
        row = conn.execute(
            select(u.deleted_us).where(u.id == user_id).with_for_update()
        ).one_or_none()
        if row is None:
            return None
        if row.deleted_us is None:
            raise HandleTaken(f"user {user_id!r} exists already", field="id")
        free_ms = row.deleted_us // 1000 + keep_ms
        if free_ms > now_ms:
            until = datetime.fromtimestamp(free_ms / 1000, UTC).isoformat(timespec="seconds")
            raise HandleTaken(
                f"user {user_id!r} was deleted; its id is kept for handle_keep_seconds "
                f"({keep_ms // 1000:,} s) after, until {until}",
                field="id",
            )
        return int(row.deleted_us)

    def _claim(
        self, conn: Connection, user_id: str, handle: str, now_ms: int, keep_ms: int
    ) -> None:
        key = handle_key(handle)
        h = handles.c
        row = conn.execute(
            select(h.user_id, h.released_ms).where(h.hkey == key).with_for_update()
        ).one_or_none()
        if row is None:
            conn.execute(handles.insert().values(hkey=key, user_id=user_id, released_ms=None))
            return
        free = row.released_ms is not None and row.released_ms + keep_ms <= now_ms
        if row.user_id != user_id and not free:
            raise HandleTaken(f"handle {handle!r} is taken")
        conn.execute(update(handles).where(h.hkey == key).values(user_id=user_id, released_ms=None))

    def update(
        self,
        user_id: str,
        *,
        handle: str | None,
        profile: Mapping[str, Any] | None,
        now_us: int,
        keep_ms: int,
    ) -> User:
        """Change the handle (the old one keeps resolving for ``keep_ms``) and/or
        replace the profile."""
        now_ms = now_us // 1000
        try:
            with self.db.write() as conn:
                current = self._get(conn, user_id, lock=True)
                if current is None:
                    raise UserNotFound(f"no user with id {user_id!r}")
                values: dict[str, Any] = {"updated_us": now_us}
                if handle is not None and handle != current.handle:
                    old, new = handle_key(current.handle), handle_key(handle)
                    self._claim(conn, user_id, handle, now_ms, keep_ms)
                    if old != new:
                        # Its own key only: since v15 an old handle's key may be
                        # another user's (two handles that became one).
                        conn.execute(
                            update(handles)
                            .where(handles.c.hkey == old, handles.c.user_id == user_id)
                            .values(released_ms=now_ms)
                        )
                    values["handle"] = handle
                if profile is not None:
                    values["profile"] = orjson.dumps(dict(profile))
                conn.execute(update(users).where(users.c.id == user_id).values(**values))
                found = self._get(conn, user_id)
        except IntegrityError:
            raise HandleTaken(f"handle {handle!r} was just taken") from None
        assert found is not None
        return found

    def delete(self, user_id: str, now_ms: int) -> User:
        """Delete the user; its handles stay reserved for the keep time (nobody
        takes over a name its followers know at once)."""
        with self.db.write() as conn:
            current = self._get(conn, user_id, lock=True)
            if current is None:
                raise UserNotFound(f"no user with id {user_id!r}")
            conn.execute(
                update(users)
                .where(users.c.id == user_id)
                .values(profile=b"{}", updated_us=now_ms * 1000, deleted_us=now_ms * 1000)
            )
            conn.execute(
                update(handles)
                .where(handles.c.user_id == user_id, handles.c.released_ms.is_(None))
                .values(released_ms=now_ms)
            )
        return current

    def get(self, user_id: str) -> User | None:
        with self.db.read() as conn:
            return self._get(conn, user_id)

    def _get(self, conn: Connection, user_id: str, *, lock: bool = False) -> User | None:
        u = users.c
        query = select(u.id, u.handle, u.profile, u.created_us, u.updated_us, u.replaced_us).where(
            u.id == user_id, u.deleted_us.is_(None)
        )
        row = conn.execute(query.with_for_update() if lock else query).one_or_none()
        return None if row is None else _user(row)

    def get_many(self, user_ids: Sequence[str]) -> dict[str, User | None]:
        """The users of ``user_ids`` there are, None for those deleted; ids no user
        ever had are left out (one query a chunk)."""
        out: dict[str, User | None] = {}
        with self.db.read() as conn:
            for part in chunks(sorted(set(user_ids))):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    "SELECT id, handle, profile, created_us, updated_us, replaced_us, "
                    f"deleted_us FROM tidings_users WHERE id IN ({marks})"
                )
                for row in self.db.fetch_raw(conn, sql, tuple(part)):
                    out[row[0]] = None if row[6] is not None else _user(row[:6])
        return out

    def by_handle(self, handle: str, now_ms: int, keep_ms: int) -> User | None:
        """The user holding ``handle`` (as normalised), or who held it within ``keep_ms``."""
        h = handles.c
        with self.db.read() as conn:
            row = conn.execute(
                select(h.user_id, h.released_ms).where(h.hkey == handle_key(handle))
            ).one_or_none()
            if row is None or (row.released_ms is not None and row.released_ms + keep_ms <= now_ms):
                return None
            return self._get(conn, row.user_id)

    # -- objects ----------------------------------------------------------------------

    def put_object(self, obj: StoredObject, writer: str | None = None) -> tuple[StoredObject, bool]:
        """Store (or replace the data of) an object; returns it and whether it is
        new. ``writer``: the user writing it (None: the application), who
        becomes the owner of a new one; NotObjectOwner, nothing written, when
        a user writes over an object (or tombstone) that is not theirs."""
        try:
            return self._put_object(obj, writer)
        except IntegrityError:
            # PostgreSQL: a concurrent first put of the same object won the
            # race (FOR UPDATE locks no row that does not exist yet).
            return self._put_object(obj, writer)

    def _put_object(self, obj: StoredObject, writer: str | None) -> tuple[StoredObject, bool]:
        o = objects.c
        with self.db.write() as conn:
            found = conn.execute(
                select(o.created_us, o.deleted_us, o.owner)
                .where(o.ref == obj.ref)
                .with_for_update()
            ).one_or_none()
            if found is not None:
                _check_owner(obj.ref, found.owner, writer, "change")
            data = orjson.dumps(dict(obj.data))
            if found is None or found.deleted_us is not None:
                conn.execute(delete(objects).where(o.ref == obj.ref))  # a tombstone gives way
                owner = writer if found is None else found.owner
                conn.execute(
                    objects.insert().values(
                        ref=obj.ref,
                        data=data,
                        created_us=obj.updated_us,
                        updated_us=obj.updated_us,
                        owner=owner,
                    )
                )
                made = StoredObject(
                    obj.type, obj.id, obj.data, obj.updated_us, obj.updated_us, owner
                )
                return made, True
            conn.execute(
                update(objects).where(o.ref == obj.ref).values(data=data, updated_us=obj.updated_us)
            )
            created, owner = int(found.created_us), found.owner
        return StoredObject(obj.type, obj.id, obj.data, created, obj.updated_us, owner), False

    def get_objects(self, refs: Sequence[str]) -> dict[str, StoredObject | None]:
        """The objects of ``refs`` (``type:id``) by ref, None for those deleted;
        refs never stored are left out (one query a chunk)."""
        out: dict[str, StoredObject | None] = {}
        with self.db.read() as conn:
            for part in chunks(sorted(set(refs))):
                marks = ", ".join(["{p}"] * len(part))
                sql = (
                    "SELECT ref, data, created_us, updated_us, deleted_us, owner "
                    f"FROM tidings_objects WHERE ref IN ({marks})"
                )
                for ref, data, created, updated, deleted, owner in self.db.fetch_raw(
                    conn, sql, tuple(part)
                ):
                    kind, _, object_id = ref.partition(":")
                    out[ref] = (
                        None
                        if deleted is not None
                        else StoredObject(
                            kind, object_id, orjson.loads(data), created, updated, owner
                        )
                    )
        return out

    def delete_object(self, ref: str, now_us: int, writer: str | None = None) -> bool:
        """Delete an object, leaving its tombstone (which keeps its owner); False
        when there was none. ``writer`` as for :meth:`put_object`."""
        o = objects.c
        with self.db.write() as conn:
            found = conn.execute(
                select(o.owner).where(o.ref == ref, o.deleted_us.is_(None)).with_for_update()
            ).one_or_none()
            if found is None:
                return False
            _check_owner(ref, found.owner, writer, "delete")
            conn.execute(
                update(objects)
                .where(o.ref == ref)
                .values(data=b"{}", updated_us=now_us, deleted_us=now_us)
            )
        return True

    # -- counts -----------------------------------------------------------------------

    def stats(self, feeds: Sequence[str]) -> dict[str, FeedStats]:
        """Followers, following and activities published of each feed (zeros for
        a feed never counted): kept by the transactions that change them."""
        out = self.counts_cache.get_many(list(feeds))
        missing = [f for f in feeds if f not in out]
        if not missing:
            return out
        s = feed_stats.c
        found = dict.fromkeys(missing, FeedStats(0, 0, 0))
        with self.db.read() as conn:
            for part in chunks(sorted(set(missing))):
                rows = conn.execute(
                    select(s.feed, s.followers, s.following, s.activities).where(s.feed.in_(part))
                )
                for feed, followers, following, published in rows:
                    found[feed] = FeedStats(int(followers), int(following), int(published))
        self.counts_cache.put_many(found)
        return out | found

    def activities_from(self, feed: str, first_id: str) -> int:
        """The activities in ``feed`` from ``first_id`` on: a re-created user's
        own (those before are the deleted user's), one range of the feed's
        index."""
        a = activities.c
        with self.db.read() as conn:
            found = conn.execute(
                select(func.count()).select_from(activities).where(a.feed == feed, a.id >= first_id)
            ).scalar_one()
        return int(found)

    def people_counts(self, profile: str, home: str) -> tuple[int, int]:
        """A user's ``(followers, following)`` as people count them, read in one
        transaction: follows of ``profile`` by feeds of ``home``'s group other
        than ``home`` (one per person however many of their feeds follow:
        timeline, aggregated, ranked; nobody is their own follower), and follows
        made by ``home`` other than of ``profile`` (an app's self-follow).
        Ranges of the follows indexes, read without the table: ~1 ms per
        10,000 followers."""
        f = follows.c
        group = home.partition(":")[0]
        with self.db.read() as conn:
            # ";" is the character after ":": every "<group>:<key>" sorts between.
            followers = conn.execute(
                select(func.count())
                .select_from(follows)
                .where(
                    f.source == profile,
                    f.follower >= f"{group}:",
                    f.follower < f"{group};",
                    f.follower != home,
                )
            ).scalar_one()
            following = conn.execute(
                select(func.count())
                .select_from(follows)
                .where(f.follower == home, f.source != profile)
            ).scalar_one()
        return int(followers), int(following)


def _user(row: Sequence[Any]) -> User:
    user_id, handle, profile, created, updated, replaced = row
    return User(
        user_id,
        handle,
        orjson.loads(profile),
        int(created),
        int(updated),
        None if replaced is None else int(replaced),
    )


def _check_owner(ref: str, owner: str | None, writer: str | None, action: str) -> None:
    """A user (``writer``) changes only the objects it created; the application
    (None) any."""
    if writer is not None and owner != writer:
        whose = "the application's" if owner is None else f"{owner!r}'s"
        raise NotObjectOwner(
            f"object {ref} is {whose}: a user may {action} only the objects it created"
        )
