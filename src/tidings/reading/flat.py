"""Pages of flat feeds: the timeline store, merged with the canonical store.

A flat feed's store holds ids, newest first, up to the group's cap. A page
is that, merged with what the store does not hold: the pulled sources the
feed follows and, once the stored feed ends, the feed's history, so a cursor
walks the whole of it. While the feed is rebuilt (its owner was idle), the
canonical store alone serves it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from tidings.canonical.recheck import Recheck
from tidings.canonical.store import CanonicalStore
from tidings.core import ids
from tidings.core.clock import real_monotonic
from tidings.core.cursor import CursorCodec
from tidings.core.errors import InvalidCursor, ValidationError
from tidings.core.fanout import merge_newest
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.limits import check_page_limit
from tidings.core.results import Page
from tidings.reading.docs import ActivityDocs
from tidings.reading.gate import ReaderGate
from tidings.stores.base import Cap, TimelineStore
from tidings.stores.caps import Caps

#: Whether a reader's rules hide an activity, given its JSON.
Hide = Callable[[bytes], bool]
#: The most ids one round trip asks for while skipping hidden entries.
MAX_HIDDEN_ASK = 1000


class FlatReads:
    """``inline``: the canonical store answers in microseconds in this process
    (SQLite), so an async read asks it on the event loop rather than in a thread."""

    def __init__(
        self,
        canonical: CanonicalStore,
        timeline: TimelineStore,
        caps: Caps,
        docs: ActivityDocs,
        gate: ReaderGate,
        cursors: CursorCodec,
        *,
        pull_grace_seconds: float,
        inline: bool,
        monotonic: Callable[[], float] = real_monotonic,
    ) -> None:
        self.canonical = canonical
        self.timeline = timeline
        self.feed_groups: Mapping[str, FeedGroup] = caps.feed_groups
        self.caps = caps
        self.docs = docs
        self.gate = gate
        self.cursors = cursors
        self.inline = inline
        # Whether any source is pulled, looked up at most every half grace period
        # (deliveries keep pushing for a whole one after a switch to pull): most
        # deployments pull nothing, and their reads then skip that query.
        self.merges_pulled = Recheck(
            self.canonical.fanout.any_pulled, pull_grace_seconds / 2, monotonic
        )

    def read_json(
        self, feed: str, limit: int, cursor: str | None, hide: Hide | None = None
    ) -> Page[bytes]:
        read = self._feed_read(feed, limit, cursor)
        read.hide = hide
        self._fill(feed, read)
        return read.page(self.cursors)

    def cursor_before(self, feed: str, activity_id: str) -> str:
        """A cursor to ``feed``'s page of what is older than ``activity_id``
        (ids order a flat feed, so any id is a position in it, held or not)."""
        self._feed_read(feed, 1, None)  # (the feed checked as a read checks it)
        if not ids.is_valid(activity_id):
            raise ValidationError(f"not an activity id: {activity_id[:64]!r}", field="cursor")
        return self.cursors.encode(f"feed:{feed}", activity_id)

    def newest(self, feed: str, n: int, hide: Hide | None = None) -> tuple[list[bytes], bool]:
        """The stored JSON of the newest ``n`` activities of ``feed`` (checked by
        the caller), as pages read them: a ranked read's candidates. Also
        whether the feed is being rebuilt (they came from the canonical store)."""
        feed_group = parse_feed_id(feed, self.feed_groups).group
        read = FeedRead(f"feed:{feed}", self.caps.cap(feed_group), n, None)
        read.hide = hide
        # Candidates are what the feed holds (and its pulled sources): its
        # history past the cap is not ranked.
        read.history = False
        self._fill(feed, read)
        return read.results, read.regenerating

    def _fill(self, feed: str, read: FeedRead) -> None:
        read.regenerating = not self.gate.reading(feed)
        page: list[str]
        docs: dict[str, bytes]
        while not read.done:
            if read.regenerating:
                page, docs = [], {}  # the canonical store alone is complete
            else:
                page, docs = self.timeline.page_docs(
                    feed, limit=read.ask, before=read.before, cap=read.cap
                )
            shown = read.cut(self._with_canonical(feed, read, page, docs))
            gone = read.take(shown, self.docs.complete(shown, docs))
            if gone:
                # Removed activities are dropped here and cleaned lazily.
                self.timeline.remove([feed], gone, read.cap)

    async def read_json_async(
        self, feed: str, limit: int, cursor: str | None, hide: Hide | None = None
    ) -> Page[bytes]:
        pages = getattr(self.timeline, "page_docs_async", None)
        if pages is None:
            # A store without async reads (memory, SQL) may wait on a lock.
            return await asyncio.to_thread(self.read_json, feed, limit, cursor, hide)
        read = self._feed_read(feed, limit, cursor)
        read.hide = hide
        # The state lookup (and the write that wakes an idle feed) waits in a
        # thread; known feeds, nearly every read, need neither.
        known = self.gate.reading_known(feed)
        if known is None:
            known = await asyncio.to_thread(self.gate.reading_looked_up, feed)
        read.regenerating = not known
        while not read.done:
            if read.regenerating:
                page, docs = [], {}
            else:
                page, docs = await pages(feed, limit=read.ask, before=read.before, cap=read.cap)
            if self.inline:
                merged = self._with_canonical(feed, read, page, docs)
            else:
                # A database server's round trip would hold up the loop.
                merged = await asyncio.to_thread(self._with_canonical, feed, read, page, docs)
            shown = read.cut(merged)
            if [i for i in shown if i not in docs]:
                # Rare (the page script brings the cached activities along) and a
                # blocking cache or SQL lookup: off the loop.
                docs = await asyncio.to_thread(self.docs.complete, shown, docs)
            gone = read.take(shown, docs)
            if gone:
                await asyncio.to_thread(self.timeline.remove, [feed], gone, read.cap)
        return read.page(self.cursors)

    def _with_canonical(
        self, feed: str, read: FeedRead, page: list[str], docs: dict[str, bytes]
    ) -> list[str]:
        """``page`` of the timeline store merged with what readers of ``feed`` take
        from the canonical store: the pulled sources it follows and, once the
        materialised feed ends (capped or short), its history, so a cursor walks
        the whole of it. Their JSON comes in the same statements, into ``docs``."""
        ask, floor = read.ask, read.cap.floor
        lists = [page]
        if self.merges_pulled():
            pulled = self.canonical.history.pulled(feed, before=read.before, floor=floor, limit=ask)
            lists += pulled.lists
            docs.update(pulled.docs)
        if len(page) < ask and (read.history or read.regenerating):
            end = page[-1] if page else read.before
            history = self.canonical.history.history(feed, before=end, floor=floor, limit=ask)
            lists += history.lists
            docs.update(history.docs)
        return merge_newest(lists, ask)

    def _feed_read(self, feed: str, limit: int, cursor: str | None) -> FeedRead:
        """A flat feed read, its arguments checked, before its first round trip."""
        feed_group = parse_feed_id(feed, self.feed_groups).group
        if self.feed_groups[feed_group].aggregated:
            raise ValidationError(
                f"{feed} is a {self.feed_groups[feed_group].kind} feed of aggregates: "
                "read it with read_aggregates"
            )
        check_page_limit(limit)
        context = f"feed:{feed}"
        before = None
        if cursor is not None:
            before = self.cursors.decode(context, cursor)
            if not ids.is_valid(before):
                raise InvalidCursor("cursor is malformed", field="cursor")
        return FeedRead(context, self.caps.cap(feed_group), limit, before)


class FeedRead:
    """One page of a flat feed across its store round trips; the sync and async
    reads differ only in how they wait for the store.

    Ids whose activity is gone are skipped (and returned by :meth:`take` for
    lazy cleanup); when a page comes up short for that, the next round trip
    continues after it.
    """

    __slots__ = (
        "before",
        "cap",
        "context",
        "done",
        "hide",
        "history",
        "last",
        "limit",
        "more",
        "regenerating",
        "results",
        "rounds",
    )

    def __init__(self, context: str, cap: Cap, limit: int, before: str | None) -> None:
        self.context, self.cap, self.limit, self.before = context, cap, limit, before
        #: Whether the reader's rules hide an activity (its JSON); None: none do.
        self.hide: Hide | None = None
        #: Store round trips that came back short of shown entries (hidden ones).
        self.rounds = 0
        #: Whether the feed's history past what its store holds is read too.
        self.history = True
        self.regenerating = False
        self.results: list[bytes] = []
        self.last = ""
        self.more = False
        self.done = False

    @property
    def ask(self) -> int:
        """Ids to ask the store for: one more than wanted, to know if there are
        more. With the reader's rules hiding some, twice as many each round
        after the first, so a long hidden run costs a few round trips, not one
        per hidden entry."""
        ask = self.limit - len(self.results) + 1
        if self.hide is not None and self.rounds:
            ask = min(MAX_HIDDEN_ASK, max(ask, self.limit) << self.rounds)
        return ask

    def cut(self, page: list[str]) -> list[str]:
        if self.hide is not None:
            # All of it is looked at: how many are shown depends on the rules.
            self.more = len(page) >= self.ask
            return page
        want = self.limit - len(self.results)
        self.more = len(page) > want
        return page[:want]

    def take(self, shown: list[str], docs: Mapping[str, bytes]) -> list[str]:
        """Keep the found activities of ``shown`` (less those ``hide`` hides);
        returns the ids without one."""
        if self.hide is not None:
            return self._take_visible(shown, docs, self.hide)
        got = [docs.get(i) for i in shown]
        if None not in got:  # nearly every page: all found
            self.results += got  # type: ignore[arg-type]  # no None in it
            if shown:
                self.last = shown[-1]
            self.done = True
            return []
        found = [i for i in shown if i in docs]
        self.results.extend(docs[i] for i in found)
        if found:
            self.last = found[-1]
        if len(found) == len(shown):
            self.done = True
            return []
        if self.more:
            self.before = shown[-1]
        else:
            self.done = True
        return [i for i in shown if i not in docs]

    def _take_visible(self, shown: list[str], docs: Mapping[str, bytes], hide: Hide) -> list[str]:
        """:meth:`take` when the reader's rules hide some: entries they hide are
        skipped, not removed, and the cursor stays on the last one shown, so a
        page is full when enough entries are left and the next page looks at
        the skipped ones again (and skips them again)."""
        missing: list[str] = []
        for i in shown:
            doc = docs.get(i)
            if doc is None:
                missing.append(i)
            elif not hide(doc):
                if len(self.results) == self.limit:
                    self.more = self.done = True  # one more is shown next time
                    return missing
                self.results.append(doc)
                self.last = i
        if len(self.results) < self.limit and self.more and shown:
            self.before = shown[-1]
            self.rounds += 1
        else:
            self.done = True
        return missing

    def page(self, cursors: CursorCodec) -> Page[bytes]:
        more = self.more and self.results
        cursor = cursors.encode(self.context, self.last) if more else None
        return Page(self.results, cursor, self.regenerating)
