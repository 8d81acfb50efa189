"""Pages of ranked feeds, exact while scores change.

A ranked feed is held like a flat one, newest first: recency is its
write-time score, so deliveries, caps and rebuilds are a flat feed's. A read
ranks the newest ``candidates`` entries with the group's ``ranking``
expression (:mod:`tidings.core.ranking`), over variables fetched in one
batch per kind: reaction counts, reactions of the last hour (``velocity``),
the reader's ``affinity`` to each actor, ``extra`` fields.

The first page freezes the order it ranked into a snapshot (the snapshot
store; ``snapshot_seconds``) that its cursor names; the pages after it are
slices of that order, so no activity shows twice and none is skipped however
scores move. Once a snapshot stops serving, the next page ranks afresh,
leaving out everything served before, and says so (``renewed``). A snapshot
is kept for a second TTL after it stops serving so that its served prefix is
known; a cursor older than that is refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from tidings.canonical.store import CanonicalStore
from tidings.core import ids
from tidings.core.cursor import CursorCodec
from tidings.core.errors import CursorExpired, InvalidCursor
from tidings.core.feeds import FeedGroup, parse_feed_id
from tidings.core.limits import check_page_limit
from tidings.core.ranking import RankingExpression, Scorer
from tidings.core.reactions import affinity
from tidings.core.snapshot import Snapshot, SnapshotFormatError, diversify
from tidings.reading.docs import ActivityDocs
from tidings.reading.flat import FlatReads, Hide
from tidings.reading.reactions import splice
from tidings.stores.base import SnapshotStore

#: Variables every activity has; any other name (but ``extra.*``) is a count
#: of reactions of that kind (``likes`` and ``like`` both count kind ``like``).
_OWN = frozenset({"age_hours", "time", "velocity", "affinity", "verb"})
_HOUR_MS = 3_600_000


@dataclass(slots=True)
class RankedPage:
    #: Each activity's stored JSON with ``score`` (and ``explain``) added.
    results: list[bytes] = field(default_factory=list)
    next: str | None = None
    #: The snapshot of the pages before had stopped serving: this page was
    #: ranked afresh, leaving out everything served before.
    renewed: bool = False
    regenerating: bool = False


#: Parsed candidates kept per process (by their JSON): readers of one source
#: rank the same activities, and parsing is most of a ranking's cost otherwise.
FEATURES_CACHED = 50_000


class Features(NamedTuple):
    """What a ranking reads of an activity itself."""

    id: str
    actor: str
    verb: str
    ms: int
    extra: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Ranking:
    expression: RankingExpression
    scorer: Scorer
    #: Each reaction-count variable and the kinds it counts.
    kinds: tuple[tuple[str, tuple[str, ...]], ...]
    #: Each ``extra.NAME`` variable: (NAME, the variable's name).
    extras: tuple[tuple[str, str], ...]


class Lookups:
    """The store's variables for one list of candidates, and the scoring that
    reads them a column at a time: a ranking of 1,000 makes a few lists, not
    a mapping per candidate (garbage collections were its p99), and each
    node of the expression runs once over a column instead of once per
    candidate."""

    def __init__(
        self,
        ranking: _Ranking,
        now_ms: int,
        counts: Mapping[str, Mapping[str, int]],
        recent: Mapping[str, int] | None,
        affinities: Mapping[str, float] | None,
    ) -> None:
        self.ranking = ranking
        self.now_ms = now_ms
        self.counts = counts
        self.recent = recent
        self.affinities = affinities

    def scores(self, features: Sequence[Features]) -> list[float]:
        """The score of each of ``features``, evaluated a column at a time."""
        return self.ranking.scorer.score_many(self.columns(features), [f.verb for f in features])

    def columns(self, features: Sequence[Features]) -> dict[str, list[float | None]]:
        """Each variable the expression reads, over ``features`` (None: an extra
        field that is missing or not a number, so the default applies)."""
        used = self.ranking.expression.variables
        now = self.now_ms
        out: dict[str, list[float | None]] = {}
        if "age_hours" in used:
            out["age_hours"] = [(now - f.ms) / _HOUR_MS for f in features]
        if "time" in used:
            out["time"] = [f.ms / 1000 for f in features]
        counts = self.counts
        for name, kinds in self.ranking.kinds:
            out[name] = [_count(counts.get(f.id), kinds) for f in features]
        if self.recent is not None:
            recent = self.recent
            out["velocity"] = [float(recent.get(f.id, 0)) for f in features]
        if self.affinities is not None:
            affinities = self.affinities
            out["affinity"] = [affinities.get(f.actor, 0.0) for f in features]
        for name, key in self.ranking.extras:
            out[key] = [_number(f.extra.get(name)) for f in features]
        return out

    def explain(self, f: Features) -> dict[str, float]:
        values: dict[str, float] = {}
        self.fill(values, f)
        return self.ranking.scorer.explain(values, f.verb)

    def fill(self, values: dict[str, float], f: Features) -> None:
        """Set ``values`` to the variables of ``f`` (extra fields it lacks are
        left out, so the expression's defaults apply)."""
        for name, column in self.columns([f]).items():
            value = column[0]
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value


def _count(found: Mapping[str, int] | None, kinds: tuple[str, ...]) -> float:
    if not found:
        return 0.0
    n = 0
    for kind in kinds:
        n += found.get(kind, 0)
    return float(n)


def _number(value: object) -> float | None:
    """An ``extra`` value as a variable: numbers only (not booleans)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class RankedReads:
    def __init__(
        self,
        canonical: CanonicalStore,
        flat: FlatReads,
        docs: ActivityDocs,
        snapshots: SnapshotStore,
        cursors: CursorCodec,
        feed_groups: Mapping[str, FeedGroup],
        *,
        now_ms: Any,
        profile_group: str,
    ) -> None:
        self.canonical = canonical
        self.flat = flat
        self.docs = docs
        self.snapshots = snapshots
        self.cursors = cursors
        self.feed_groups = feed_groups
        self.now_ms = now_ms
        self.profile_group = profile_group
        self._rankings = {
            name: _ranking(group) for name, group in feed_groups.items() if group.ranked
        }
        self._parsed: dict[bytes, Features] = {}

    def read(
        self,
        feed: str,
        limit: int,
        cursor: str | None,
        *,
        explain: bool = False,
        hide: Hide | None = None,
    ) -> RankedPage:
        """A page of ``feed``; ``hide``: the reader's rules (hidden activities
        are not ranked, and are left out of later pages of the snapshot)."""
        feed_group = parse_feed_id(feed, self.feed_groups).group
        group = self.feed_groups[feed_group]
        check_page_limit(limit)
        if cursor is None:
            return self._first(feed, group, limit, explain, excluded=[], hide=hide)
        key, offset = self._position(feed, cursor)
        raw = self.snapshots.get(key)
        if raw is None:
            raise CursorExpired(
                "this ranked page's snapshot has expired; read the feed from the first page",
                field="cursor",
            )
        try:
            snapshot = Snapshot.unpack(raw)
        except SnapshotFormatError:
            raise InvalidCursor("cursor names a damaged snapshot", field="cursor") from None
        if snapshot.feed != feed:
            raise InvalidCursor("cursor was made for another feed", field="cursor")
        if snapshot.expires_ms <= self.now_ms():
            served = snapshot.excluded + snapshot.ids[:offset]
            page = self._first(feed, group, limit, explain, excluded=served, hide=hide)
            page.renewed = True
            return page
        return self._slice(feed, group, snapshot, key, offset, limit, explain, hide)

    # -- the first page: rank, freeze -------------------------------------------------

    def _first(
        self,
        feed: str,
        group: FeedGroup,
        limit: int,
        explain: bool,
        excluded: list[str],
        hide: Hide | None,
    ) -> RankedPage:
        docs, regenerating = self.flat.newest(feed, group.candidates, hide)
        features = [self._features(d) for d in docs]
        if excluded:
            left_out = set(excluded)
            kept = [n for n, f in enumerate(features) if f.id not in left_out]
            docs, features = [docs[n] for n in kept], [features[n] for n in kept]
        ranking = self._rankings[feed.partition(":")[0]]
        lookups = self._lookups(feed, ranking, features)
        scores = lookups.scores(features)
        # Best first. Candidates come newest first and the sort is stable, so
        # equal scores stay newest first: the order is total.
        by_rank = sorted(range(len(features)), key=scores.__getitem__, reverse=True)
        spread = diversify([features[n].actor for n in by_rank], limit, group.diversity)
        order = [by_rank[n] for n in spread]
        page = RankedPage(regenerating=regenerating)
        if len(order) > limit:
            key = secrets.token_hex(16)
            ttl_ms = int(group.snapshot_seconds * 1000)
            snapshot = Snapshot(
                feed=feed,
                ids=[features[n].id for n in order],
                scores=[scores[n] for n in order],
                expires_ms=self.now_ms() + ttl_ms,
                excluded=excluded,
            )
            # Kept a second TTL: a page asked for after it stops serving still
            # knows what was served.
            self.snapshots.put(key, snapshot.pack(), 2 * ttl_ms)
            page.next = self._cursor(feed, key, limit)
        for n in order[:limit]:
            extra: dict[str, Any] = {"score": scores[n]}
            if explain:
                extra["explain"] = lookups.explain(features[n])
            page.results.append(_with(docs[n], extra))
        return page

    def _features(self, doc: bytes) -> Features:
        """What ranking reads of an activity, parsed once per version of its JSON
        (the cache is keyed by the JSON itself, so an update is a new entry)."""
        found = self._parsed.get(doc)
        if found is None:
            item = orjson.loads(doc)
            aid: str = item["id"]
            found = Features(aid, item["actor"], item["verb"], int(aid[:12], 16), item["extra"])
            if len(self._parsed) >= FEATURES_CACHED:
                self._parsed.clear()  # starts over: one parse per candidate again
            self._parsed[doc] = found
        return found

    # -- the pages after: slices of the snapshot ------------------------------------------

    def _slice(
        self,
        feed: str,
        group: FeedGroup,
        snapshot: Snapshot,
        key: str,
        offset: int,
        limit: int,
        explain: bool,
        hide: Hide | None,
    ) -> RankedPage:
        chosen = snapshot.ids[offset : offset + limit]
        found = self.docs.complete(chosen, {})
        if hide is not None:  # muted (say) since the snapshot was made
            found = {aid: doc for aid, doc in found.items() if not hide(doc)}
        page = RankedPage()
        end = offset + len(chosen)
        if end < len(snapshot.ids):
            page.next = self._cursor(feed, key, end)
        shown = [(n, aid) for n, aid in enumerate(chosen, offset) if aid in found]
        explained: list[dict[str, float]] = []
        if explain and shown:
            ranking = self._rankings[feed.partition(":")[0]]
            features = [self._features(found[aid]) for _, aid in shown]
            lookups = self._lookups(feed, ranking, features)
            explained = [lookups.explain(f) for f in features]
        for j, (n, aid) in enumerate(shown):
            # A removed activity is skipped: the page comes up short rather
            # than pulling a later one forward (its cursor is still exact).
            extra: dict[str, Any] = {"score": snapshot.scores[n]}
            if explained:
                extra["explain"] = explained[j]
            page.results.append(_with(found[aid], extra))
        return page

    # -- the variables ----------------------------------------------------------------

    def _lookups(self, feed: str, ranking: _Ranking, features: Sequence[Features]) -> Lookups:
        """The variables of ``features`` that come from the store, each kind one
        batched lookup for the whole list."""
        used = ranking.expression.variables
        now = self.now_ms()
        activity_ids = [f.id for f in features]
        counts = self.canonical.reaction_reads.counts(activity_ids) if ranking.kinds else {}
        recent = None
        if "velocity" in used:
            recent = self.canonical.reaction_reads.recent(
                activity_ids, ids.floor_id(now - _HOUR_MS)
            )
        affinities = self._affinities(feed, features) if "affinity" in used else None
        return Lookups(ranking, now, counts, recent, affinities)

    def _affinities(self, feed: str, features: Sequence[Features]) -> dict[str, float]:
        """The reader's (the feed owner's) affinity to each actor of ``features``."""
        reader = feed.partition(":")[2]
        actors = sorted({f.actor for f in features})
        reacted = self.canonical.reaction_reads.affinities(reader, actors)
        profiles = {f"{self.profile_group}:{a}": a for a in actors}
        followed = {profiles[s] for s in self.canonical.follows.sources_among(feed, list(profiles))}
        return {a: affinity(reacted.get(a, 0), a in followed) for a in actors}

    # -- cursors ------------------------------------------------------------------------

    def _cursor(self, feed: str, key: str, offset: int) -> str:
        return self.cursors.encode(f"ranked:{feed}", f"{key}.{offset}")

    def _position(self, feed: str, cursor: str) -> tuple[str, int]:
        position = self.cursors.decode(f"ranked:{feed}", cursor)
        key, _, offset = position.partition(".")
        if len(key) != 32 or not offset.isdigit():
            raise InvalidCursor("cursor is malformed", field="cursor")
        return key, int(offset)


def _ranking(group: FeedGroup) -> _Ranking:
    expression = RankingExpression.parse(group.ranking_source)
    used = expression.variables
    names = sorted(v for v in used if v not in _OWN and not v.startswith("extra."))
    kinds = tuple((name, _kinds_of(name)) for name in names)
    extras = tuple(sorted((v[6:], v) for v in used if v.startswith("extra.")))
    scorer = expression.compile(weights=group.weights, defaults=group.defaults)
    return _Ranking(expression, scorer, kinds, extras)


def _kinds_of(name: str) -> tuple[str, ...]:
    """The reaction kinds a variable counts: its own, and for a plural (``likes``,
    ``comments``, as people write them) the singular kind too."""
    if name.endswith("s") and len(name) > 1:
        return (name, name[:-1])
    return (name,)


def _with(doc: bytes, fields: dict[str, Any]) -> bytes:
    return splice(doc, b"," + orjson.dumps(fields)[1:-1])
