"""The blocking client: :class:`Client`, and :class:`EventStream` for live events."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx

from tidings_client import _routes as routes
from tidings_client._core import Attempts, Call, Retry, finish, problem_error, unreachable
from tidings_client._sse import OPENED, Event, Opened, Parser, Resume
from tidings_client.errors import ApiError, Unreachable
from tidings_client.types import (
    JSON,
    Activity,
    ActivityIn,
    Aggregate,
    AggregatePage,
    BatchResult,
    Block,
    Counts,
    Filter,
    FollowBatchResult,
    FollowPage,
    FollowResult,
    Health,
    Mute,
    Page,
    Reaction,
    ReactionPage,
    Stats,
    StoredObject,
    User,
)

T = TypeVar("T")
USER_AGENT = "tidings-client/0.1"
#: Seconds a live stream may stay silent before it counts as dropped: the
#: service sends a heartbeat every 15 s by default (sse_heartbeat_seconds).
STREAM_READ_TIMEOUT = 45.0


def _headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "user-agent": USER_AGENT}


_JSON_BODY = {"content-type": "application/json"}


class Client:
    """A tidings service at ``base_url``, called with ``token`` (a server or user token).

    Idempotent calls (reads, publishes carrying a ``foreign_id``) are tried
    again after a dropped connection or a 429/502/503/504, as ``retry`` says;
    no other call ever is. Errors raise :class:`~tidings_client.ApiError`.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retry: Retry | None = None,
        stream_retry: Retry | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self._http = http or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout)
        self._http.headers.update(_headers(token))
        self.retry = retry or Retry()
        self.stream_retry = stream_retry

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def call(self, call: Call[T]) -> T:
        """Send ``call`` (trying again as its idempotence allows); its result."""
        attempts = Attempts(self.retry, call.idempotent)
        headers = {**call.headers, **_JSON_BODY} if call.body is not None else call.headers
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params, content=call.body, headers=headers
                )
            except httpx.TransportError as exc:
                time.sleep(attempts.after(unreachable(call, exc)))
                continue
            try:
                return finish(call, response.status_code, response.headers, response.content)
            except ApiError as error:
                time.sleep(attempts.after(error))

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        feed: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        reactions: str | None = None,
        user: str | None = None,
        explain: bool = False,
        enrich: bool = False,
        fields: str | None = None,
    ) -> Page:
        """A page of a flat or ranked feed, newest (or best) first; pass ``next`` as ``cursor``."""
        args = (feed, limit, cursor, reactions, user, explain, enrich, fields)
        return self.call(routes.read(*args))

    def read_aggregates(
        self,
        feed: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        reactions: str | None = None,
        user: str | None = None,
        enrich: bool = False,
        fields: str | None = None,
        mark_seen: bool = False,
    ) -> AggregatePage:
        """A page of an aggregated or notification feed's groups."""
        args = (feed, limit, cursor, reactions, user, enrich, fields, mark_seen)
        return self.call(routes.read_aggregates(*args))

    def pages(self, feed: str, **options: Any) -> Iterator[Page]:
        """Every page of a flat or ranked feed, by cursor (``options`` as for :meth:`read`)."""
        cursor = options.pop("cursor", None)
        while True:
            page = self.read(feed, cursor=cursor, **options)
            yield page
            cursor = page["next"]
            if cursor is None:
                return

    def activities(self, feed: str, **options: Any) -> Iterator[Activity]:
        """Every activity of a flat or ranked feed, page after page."""
        for page in self.pages(feed, **options):
            yield from page["results"]

    def aggregates(self, feed: str, **options: Any) -> Iterator[Aggregate]:
        """Every group of a grouped feed, page after page (``options`` as for :meth:`read_aggregates`)."""
        cursor = options.pop("cursor", None)
        while True:
            page = self.read_aggregates(feed, cursor=cursor, **options)
            yield from page["results"]
            cursor = page["next"]
            if cursor is None:
                return

    def read_as2(self, feed: str, *, limit: int | None = None, cursor: str | None = None) -> JSON:
        """A page as an ActivityStreams 2.0 ``OrderedCollectionPage``."""
        return self.call(routes.read_as2(feed, limit, cursor))

    def mark_seen(self, feed: str, aggregates: Sequence[str] | None = None) -> Counts:
        """Mark ``aggregates`` (their keys) of a notification feed seen (None: all); the counts after."""
        return self.call(routes.mark(feed, aggregates, read=False))

    def mark_read(self, feed: str, aggregates: Sequence[str] | None = None) -> Counts:
        """Mark ``aggregates`` read, and so seen (None: all); the counts after."""
        return self.call(routes.mark(feed, aggregates, read=True))

    # -- activities --------------------------------------------------------------------------

    def publish(self, feed: str, activity: ActivityIn) -> Activity:
        """Publish ``activity`` to ``feed``; with a repeated ``foreign_id``, the stored one."""
        return self.call(routes.publish(feed, activity))

    def publish_batch(self, feed: str, activities: Sequence[ActivityIn]) -> BatchResult:
        """Publish up to 100 activities in one transaction: all stored, or none."""
        return self.call(routes.publish_batch(feed, activities))

    def get_activity(
        self, activity_id: str, *, enrich: bool = False, fields: str | None = None
    ) -> Activity:
        """One activity by id."""
        return self.call(routes.get_activity(activity_id, enrich, fields))

    def get_by_foreign_id(self, feed: str, foreign_id: str) -> Activity:
        """The activity published to ``feed`` with ``foreign_id``."""
        return self.call(routes.get_by_foreign_id(feed, foreign_id))

    def update_activity(
        self, activity_id: str, *, set: JSON | None = None, unset: Iterable[str] | None = None
    ) -> Activity:
        """Set and unset keys of the activity's ``extra``."""
        return self.call(routes.update_activity(activity_id, set, unset))

    def remove_activity(self, feed: str, activity_id: str) -> None:
        """Remove an activity published to ``feed`` from every feed it reached."""
        self.call(routes.remove_activity(feed, activity_id))

    def remove_by_foreign_id(self, feed: str, foreign_id: str) -> None:
        """Remove the activity with ``foreign_id`` from ``feed`` and every feed it reached."""
        self.call(routes.remove_by_foreign_id(feed, foreign_id))

    # -- follows -----------------------------------------------------------------------------

    def follow(self, follower: str, source: str, *, copy_limit: int | None = None) -> FollowResult:
        """``follower`` follows ``source``, copying its newest ``copy_limit`` activities."""
        return self.call(routes.follow(follower, source, copy_limit))

    def unfollow(self, follower: str, source: str, *, keep_history: bool = False) -> None:
        """Stop following; unless ``keep_history``, drop what came through ``source``."""
        self.call(routes.unfollow(follower, source, keep_history))

    def follow_many(
        self, pairs: Iterable[tuple[str, str]], *, copy_limit: int | None = None
    ) -> FollowBatchResult:
        """Up to 1,000 ``(follower, source)`` follows in one transaction."""
        return self.call(routes.follow_many(pairs, copy_limit))

    def followers(
        self, feed: str, *, limit: int | None = None, cursor: str | None = None
    ) -> FollowPage:
        """A page of the feeds following ``feed``."""
        return self.call(routes.follow_page(feed, "followers", limit, cursor))

    def following(
        self, feed: str, *, limit: int | None = None, cursor: str | None = None
    ) -> FollowPage:
        """A page of the feeds ``feed`` follows."""
        return self.call(routes.follow_page(feed, "following", limit, cursor))

    # -- reactions ---------------------------------------------------------------------------

    def add_reaction(
        self,
        activity_id: str,
        kind: str,
        user: str,
        *,
        data: JSON | None = None,
        to: Sequence[str] = (),
        parent: str | None = None,
    ) -> Reaction:
        """React to an activity (or, with ``parent``, to one of its reactions)."""
        return self.call(routes.add_reaction(activity_id, kind, user, data, to, parent))

    def reactions(
        self,
        activity_id: str,
        *,
        kind: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReactionPage:
        """A page of the activity's reactions, newest first."""
        return self.call(routes.activity_reactions(activity_id, kind, limit, cursor))

    def reaction_children(
        self,
        reaction_id: str,
        *,
        kind: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReactionPage:
        """A page of the reactions to a reaction (replies to a comment)."""
        return self.call(routes.reaction_children(reaction_id, kind, limit, cursor))

    def get_reaction(self, reaction_id: str) -> Reaction:
        """One reaction by id."""
        return self.call(routes.get_reaction(reaction_id))

    def update_reaction(self, reaction_id: str, data: JSON) -> Reaction:
        """Replace the reaction's ``data``."""
        return self.call(routes.update_reaction(reaction_id, data))

    def remove_reaction(self, reaction_id: str, *, soft: bool = False) -> None:
        """Remove the reaction and the reactions under it; ``soft``: so that
        :meth:`restore_reaction` can bring them back."""
        self.call(routes.remove_reaction(reaction_id, soft))

    def restore_reaction(self, reaction_id: str) -> Reaction:
        """Bring back a reaction removed with ``soft``, with those under it."""
        return self.call(routes.restore_reaction(reaction_id))

    # -- users, objects, stats ---------------------------------------------------------------

    def create_user(self, user_id: str, handle: str, profile: JSON | None = None) -> User:
        """Create a user (409 when the id or handle is taken)."""
        return self.call(routes.create_user(user_id, handle, profile))

    def get_user(self, user_id: str) -> User:
        """A user with exact counts."""
        return self.call(routes.get_user(user_id))

    def user_by_handle(self, handle: str) -> User:
        """The user holding ``handle``, in any case or width."""
        return self.call(routes.user_by_handle(handle))

    def update_user(
        self, user_id: str, *, handle: str | None = None, profile: JSON | None = None
    ) -> User:
        """Rename and/or replace the profile."""
        return self.call(routes.update_user(user_id, handle, profile))

    def delete_user(self, user_id: str) -> None:
        """Delete a user (enriched reads show a tombstone)."""
        self.call(routes.delete_user(user_id))

    def feed_stats(self, feed: str) -> Stats:
        """Exact follower, following and published-activity counts of ``feed``."""
        return self.call(routes.feed_stats(feed))

    def put_object(self, kind: str, object_id: str, data: JSON) -> StoredObject:
        """Store what activities refer to as ``kind:object_id``."""
        return self.call(routes.put_object(kind, object_id, data))

    def get_object(self, kind: str, object_id: str) -> StoredObject:
        """A stored object."""
        return self.call(routes.get_object(kind, object_id))

    def delete_object(self, kind: str, object_id: str) -> None:
        """Delete an object (enriched reads show a tombstone)."""
        self.call(routes.delete_object(kind, object_id))

    # -- rules -------------------------------------------------------------------------------

    def mute(
        self,
        user_id: str,
        target: str,
        *,
        duration_s: int | None = None,
        notifications: bool = True,
    ) -> Mute:
        """Hide ``target``'s activities from ``user_id`` (for ``duration_s``, or until unmuted)."""
        return self.call(routes.mute(user_id, target, duration_s, notifications))

    def mutes(self, user_id: str) -> list[Mute]:
        """The user's mutes."""
        return cast(list[Mute], self.call(routes.rule_list(user_id, "mutes")))

    def unmute(self, user_id: str, target: str) -> None:
        self.call(routes.rule_delete(user_id, "mutes", target))

    def block(self, user_id: str, target: str) -> Block:
        """Block ``target``: hidden everywhere, follows between the two ended."""
        return self.call(routes.block(user_id, target))

    def blocks(self, user_id: str) -> list[Block]:
        """The user's blocks."""
        return cast(list[Block], self.call(routes.rule_list(user_id, "blocks")))

    def unblock(self, user_id: str, target: str) -> None:
        self.call(routes.rule_delete(user_id, "blocks", target))

    def add_filter(
        self,
        user_id: str,
        keywords: Sequence[str],
        *,
        whole_word: bool = True,
        contexts: Sequence[str] | None = None,
        duration_s: int | None = None,
    ) -> Filter:
        """Hide activities holding any of ``keywords`` in the ``contexts`` named."""
        return self.call(routes.add_filter(user_id, keywords, whole_word, contexts, duration_s))

    def filters(self, user_id: str) -> list[Filter]:
        """The user's keyword filters."""
        return cast(list[Filter], self.call(routes.rule_list(user_id, "filters")))

    def delete_filter(self, user_id: str, filter_id: str) -> None:
        self.call(routes.rule_delete(user_id, "filters", filter_id))

    # -- operations and live events ----------------------------------------------------------

    def health(self) -> Health:
        """``/healthz``: both stores answer (else :class:`~tidings_client.Unavailable`)."""
        return self.call(routes.health())

    def metrics(self) -> str:
        """The Prometheus metrics text."""
        return self.call(routes.metrics())

    def events(
        self,
        feed: str,
        *,
        last_event_id: str | None = None,
        enrich: bool = False,
        fields: str | None = None,
    ) -> EventStream:
        """The feed's live events, resumed after ``last_event_id`` (and after
        every dropped connection) with no gap and no duplicate."""
        params = routes.events_params(enrich, fields)
        resume = Resume(last_event_id, self.stream_retry)
        return EventStream(self._http, routes.events_path(feed), params, resume)

    def firehose(
        self,
        *,
        track: str | Sequence[str] | None = None,
        follow: str | Sequence[str] | None = None,
        locations: str | Sequence[str] | None = None,
        sample: float | None = None,
    ) -> EventStream:
        """Every activity published from now on that passes the filters (ORed)."""
        params = routes.firehose_params(track, follow, locations, sample)
        return EventStream(self._http, "/v1/firehose", params, Resume(None, self.stream_retry))


class EventStream:
    """Live events, iterated with ``for``; reconnects (with ``Last-Event-ID``)
    whenever the connection drops or the server restarts. ``last_event_id``
    is where a later stream would resume. Close it, or leave its ``with``."""

    def __init__(
        self, http: httpx.Client, path: str, params: Mapping[str, str], resume: Resume
    ) -> None:
        self._http, self._path, self._params, self._resume = http, path, params, resume
        self._response: httpx.Response | None = None
        self._closed = False
        self._run: Iterator[Event | Opened] | None = None

    @property
    def last_event_id(self) -> str | None:
        """The id of the last event handed out: where a new stream would resume."""
        return self._resume.last_event_id

    @property
    def connected(self) -> bool:
        """Whether a connection is open now (the service then sends every new event)."""
        return self._response is not None

    def __iter__(self) -> Iterator[Event]:
        if self._run is None:
            self._run = self._connections()
        for item in self._run:
            if isinstance(item, Event):
                yield item

    def _connections(self) -> Iterator[Event | Opened]:
        """Events, across reconnections; :data:`OPENED` after each connection opens."""
        timeout = httpx.Timeout(self._http.timeout.connect, read=STREAM_READ_TIMEOUT)
        while not self._closed:
            try:
                with self._http.stream(
                    "GET", self._path, params=self._params, headers=self._resume.headers(),
                    timeout=timeout,
                ) as response:  # fmt: skip
                    if response.status_code != 200:
                        response.read()
                        error = problem_error(
                            response.status_code, response.headers, response.content
                        )
                        time.sleep(self._resume.refused(error))
                        continue
                    self._response = response
                    self._resume.opened()
                    yield OPENED
                    yield from self._read(response)
                ended = Unreachable(f"GET {self._path}: the stream ended")
            except httpx.TransportError as exc:
                if self._closed:
                    return
                ended = Unreachable(f"GET {self._path}: {type(exc).__name__}: {exc}")
            finally:
                self._response = None
            if not self._closed:
                time.sleep(self._resume.dropped(ended))

    def _read(self, response: httpx.Response) -> Iterator[Event]:
        parser, accept = Parser(), self._resume.accept
        for line in response.iter_lines():
            event = parser.line(line)
            if event is not None and accept(event):
                yield event

    def close(self) -> None:
        """Stop: the connection is closed, and iteration ends."""
        self._closed = True
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> EventStream:
        """Connect now: every event from here on reaches the ``for`` loop (a
        publish made inside the ``with`` before iterating is not missed)."""
        self._run = self._connections()
        for item in self._run:
            if item is OPENED:
                break
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
