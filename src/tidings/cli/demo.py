"""A demo dataset: a power-law social graph and a month of activity.

The shape, with the defaults:

* 1,000 users ``u0001``..., each a user (a handle, a name, an avatar the web
  app draws) with ``user:<key>`` (what they do) and ``timeline:<key>`` (what
  they follow). A timeline follows its own user feed
  and user feeds drawn from a Zipf distribution over a random popularity
  ranking: a handful of users are followed by almost everyone, the long tail
  by a few. ``timeline_aggregated:<key>`` follows the same feeds, aggregated
  ("bob liked 3 photos"), ``timeline_ranked:<key>`` too (read in ranked
  order), and ``notification:<key>`` aggregates what concerns the user ("alice
  and 4 others liked your photo").
* 12,000 fans (``timeline:f00001``...): timelines without a user feed that
  follow the top celebrities (and a few others). A power law over only 1,000
  users cannot give anyone 10,000 followers; the fans do, so the demo fans
  out to follower sets of that size.
* 20,000 activities over the last 30 days: posts (photos, articles, videos,
  status updates), then likes, comments and shares of earlier posts. Those
  notify the post's author (``to: notification:<author>``), and some posts
  and comments mention a user, who is notified too.
* Likes and comments on the newest 300 posts as reactions, so the web app
  shows counts on what people see first.

The same arguments give the same dataset (every random choice comes from RNGs
seeded by ``seed``; only timestamps move with the clock) and every activity
has a ``foreign_id``, so seeding twice adds nothing the second time.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tidings.core.errors import ActivityNotFound, ValidationError
from tidings.core.limits import MAX_BATCH, MAX_FOLLOW_BATCH
from tidings.core.users import HandleTaken
from tidings.engine import Tidings

DEFAULT_USERS = 1_000
DEFAULT_ACTIVITIES = 20_000
DEFAULT_SEED = 7
DEFAULT_FANS = 12_000
MIN_USERS = 10

#: ``progress(phase, done, total)``; phases are "follows", "activities", "deliveries",
#: "reactions".
Progress = Callable[[str, int, int], None]

#: Chance that a fan follows the most-followed user, the second, the third:
#: high enough that with 12,000 fans each has 10,000+ followers.
_FAN_CELEBRITY_ODDS = (0.92, 0.88, 0.85)
_ZIPF_EXPONENT = 1.1
_CELEBRITY_MIN_ACTIVITIES = 5
_WINDOW_SECONDS = 30 * 86_400
#: The newest posts that get likes and comments (reactions), and likes at most.
_REACTED_POSTS = 300
_MAX_LIKES = 12
_DRAIN_POLL_SECONDS = 0.25

_VERBS = ("post", "like", "comment", "share")
_VERB_WEIGHTS = (30, 40, 20, 10)
_POST_KINDS = ("photo", "status", "article", "video")
_POST_KIND_WEIGHTS = (45, 25, 20, 10)
_ADJECTIVES = (
    "quiet", "golden", "rainy", "busy", "tiny", "electric", "misty", "late", "first", "wild",
)  # fmt: skip
_NOUNS = (
    "harbour", "market", "morning", "garden", "bridge", "kitchen", "trail", "concert", "city",
    "workshop",
)  # fmt: skip
_FIRST_NAMES = (
    "Ada", "Alan", "Amara", "Bea", "Bruno", "Chen", "Dara", "Eli", "Esme", "Farah", "Felix",
    "Grace", "Hana", "Ines", "Ivo", "Jon", "Kai", "Lena", "Leo", "Mara", "Mateo", "Nia", "Noor",
    "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tess", "Theo", "Uma", "Vera", "Wes", "Yara", "Zoe",
    "Ravi", "Otto", "Lior", "Maya",
)  # fmt: skip
_LAST_NAMES = (
    "Abara", "Berg", "Castro", "Dubois", "Eriksen", "Fontaine", "Garcia", "Haddad", "Ito",
    "Jensen", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe",
    "Rossi", "Santos", "Tanaka", "Usman", "Varga", "Weber", "Xu", "Yilmaz", "Zhou", "Mbeki",
    "Novak", "Oliveira", "Park", "Reyes", "Silva", "Tran", "Vogel", "Walsh", "Young", "Khan",
    "Lopez", "Meyer", "Nguyen",
)  # fmt: skip
_BIOS = (
    "photographs {} at dawn", "writes about {}", "collects {} stories", "draws {} every day",
    "runs a {} blog", "thinks in {}s", "maps every {} in town", "bakes for the {} crowd",
)  # fmt: skip
_REMARKS = (
    "love this", "so good", "where is this?", "great shot", "agreed", "haha", "thanks for sharing",
    "needed this today", "wow", "saving this",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Person:
    """A demo user as the users API stores it."""

    id: str
    handle: str
    name: str
    bio: str

    @property
    def profile(self) -> dict[str, str]:
        # The avatar is drawn by the web app from the id (nothing fetched elsewhere).
        return {"name": self.name, "bio": self.bio, "avatar": f"/app/avatars/{self.id}.svg"}


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """Everything ``seed`` writes, in the order it writes it."""

    users: list[str]
    people: list[Person]
    fans: list[str]
    #: User keys by popularity rank: the Zipf ranks follows were drawn with.
    ranking: list[str]
    celebrities: list[str]
    follows: list[tuple[str, str]]
    #: ``(feed, activity)`` pairs, oldest first.
    activities: list[tuple[str, dict[str, Any]]]
    #: Likes and comments on the newest posts: ``(index in activities, kind,
    #: user, comment text or None)``, added as reactions (with counts).
    reactions: list[tuple[int, str, str, str | None]] = field(default_factory=list)

    def first_follower(self, source: str, group_prefix: str) -> str | None:
        """The first follower of ``source`` whose feed id starts with ``group_prefix``."""
        own = f"timeline:{source.partition(':')[2]}"
        for follower, followed in self.follows:
            if followed == source and follower != own and follower.startswith(group_prefix):
                return follower
        return None


@dataclass(frozen=True, slots=True)
class DemoResult:
    plan: DemoPlan
    #: Follows this run created (0 when the dataset was there already).
    new_follows: int
    #: Outbox rows the final drain carried out: one per newly added activity.
    deliveries: int
    #: True when an earlier run had seeded this dataset and only the drain ran.
    reused: bool = False


def seed(
    engine: Tidings,
    users: int = DEFAULT_USERS,
    activities: int = DEFAULT_ACTIVITIES,
    seed: int = DEFAULT_SEED,
    *,
    fans: int = DEFAULT_FANS,
    progress: Progress | None = None,
) -> DemoResult:
    """Write the demo dataset through ``engine`` and deliver it.

    Meant for an engine with ``task_runner="manual"``: activities are published
    first and fanned out by one drain at the end, which is much faster than
    delivering each one as it is added.
    """
    _check_sizes(users=users, activities=activities, fans=fans)
    report = progress or _no_progress
    plan = make_plan(users, activities, seed, fans=fans, now=engine.clock.now())
    if _already_seeded(engine, plan):
        # Re-adding would change nothing; skip straight to finishing deliveries.
        report("follows", len(plan.follows), len(plan.follows))
        report("activities", len(plan.activities), len(plan.activities))
        return DemoResult(plan, 0, _drain(engine, report), reused=True)
    _create_users(engine, plan.people)
    new_follows = _follow_all(engine, plan.follows, report)
    _publish_all(engine, plan.activities, report)
    deliveries = _drain(engine, report)
    _react_all(engine, plan, report)
    return DemoResult(plan, new_follows, deliveries)


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


def _check_sizes(**sizes: int) -> None:
    minimum = {"users": MIN_USERS, "activities": 0, "fans": 0}
    for name, value in sizes.items():
        if value < minimum[name]:
            raise ValidationError(f"must be at least {minimum[name]}, got {value}", field=name)


# -- planning (pure) ----------------------------------------------------------


def make_plan(users: int, activities: int, seed: int, *, fans: int, now: datetime) -> DemoPlan:
    """The dataset for these arguments; ``now`` only anchors the timestamps."""
    keys = _keys("u", users, width=4)
    fan_keys = _keys("f", fans, width=5)
    # One RNG per part, so changing the number of fans leaves users and
    # activities (and so their foreign_ids) as they were.
    ranking = keys[:]
    random.Random(f"{seed}:ranking").shuffle(ranking)
    zipf = _ZipfPicker(ranking)
    follows = _user_follows(random.Random(f"{seed}:users"), keys, zipf)
    follows += _fan_follows(random.Random(f"{seed}:fans"), fan_keys, zipf)
    celebrities = ranking[: len(_FAN_CELEBRITY_ODDS)]
    maker = _ActivityMaker(random.Random(f"{seed}:activities"), zipf, celebrities)
    stream = maker.stream(keys, activities, now=now, id_prefix=f"demo{seed}")
    return DemoPlan(
        users=keys,
        people=_people(random.Random(f"{seed}:people"), keys),
        fans=fan_keys,
        ranking=ranking,
        celebrities=celebrities,
        follows=list(dict.fromkeys(follows)),
        activities=stream,
        reactions=_reactions(random.Random(f"{seed}:reactions"), stream, zipf),
    )


def _people(rng: random.Random, keys: Sequence[str]) -> list[Person]:
    """A distinct name for each user; handles are the names, lower-cased
    (numbered past the names there are)."""
    names = [(first, last) for first in _FIRST_NAMES for last in _LAST_NAMES]
    rng.shuffle(names)
    people = []
    for n, key in enumerate(keys):
        first, last = names[n % len(names)]
        round_ = n // len(names)
        handle = f"{first}.{last}".lower() + (str(round_ + 1) if round_ else "")
        bio = rng.choice(_BIOS).format(rng.choice(_NOUNS))
        people.append(Person(key, handle, f"{first} {last}", bio))
    return people


def _reactions(
    rng: random.Random, stream: Sequence[tuple[str, dict[str, Any]]], zipf: _ZipfPicker
) -> list[tuple[int, str, str, str | None]]:
    """Likes and a few comments on the newest posts, so timelines show counts;
    likers drawn like follows (popular users like more, and more often)."""
    posts = [n for n, (_, a) in enumerate(stream) if a["verb"] == "post"][-_REACTED_POSTS:]
    # Half the users at most, so distinct likers of a steep Zipf are found quickly.
    most = min(_MAX_LIKES, (len(zipf.ranking) - 1) // 2)
    out: list[tuple[int, str, str, str | None]] = []
    for n in posts:
        author = stream[n][1]["actor"]
        likes = min(most, int(rng.expovariate(1 / 3)))
        likers = zipf.distinct(rng, likes, exclude=author) if likes else []
        out += [(n, "like", user, None) for user in likers]
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
            out.append((n, "comment", zipf.one(rng), rng.choice(_REMARKS)))
    return out


def _keys(prefix: str, count: int, *, width: int) -> list[str]:
    width = max(width, len(str(count)))
    return [f"{prefix}{n:0{width}d}" for n in range(1, count + 1)]


class _ZipfPicker:
    """Draws users with probability proportional to 1 / rank ** exponent."""

    def __init__(self, ranking: Sequence[str]) -> None:
        self.ranking = ranking
        weights = (1 / rank**_ZIPF_EXPONENT for rank in range(1, len(ranking) + 1))
        self.cum_weights = list(itertools.accumulate(weights))

    def one(self, rng: random.Random) -> str:
        return rng.choices(self.ranking, cum_weights=self.cum_weights)[0]

    def distinct(self, rng: random.Random, count: int, *, exclude: str | None = None) -> list[str]:
        """``count`` different users (never ``exclude``); ``count`` must leave some unpicked."""
        chosen: dict[str, None] = {}
        while len(chosen) < count:
            for key in rng.choices(self.ranking, cum_weights=self.cum_weights, k=count):
                if key != exclude and len(chosen) < count:
                    chosen[key] = None
        return list(chosen)


def _user_follows(
    rng: random.Random, keys: Sequence[str], zipf: _ZipfPicker
) -> list[tuple[str, str]]:
    # Half the users at most, so drawing distinct users from a steep Zipf
    # distribution still ends quickly on small demos.
    most = max(1, (len(keys) - 1) // 2)
    pairs: list[tuple[str, str]] = []
    for key in keys:
        # Log-normal: most users follow 5-30 feeds, a few 60 or more.
        count = min(most, max(3, round(rng.lognormvariate(2.6, 0.6))))
        sources = [key, *zipf.distinct(rng, count, exclude=key)]  # your own posts too
        pairs.extend((f"timeline:{key}", f"user:{s}") for s in sources)
        # The same follows, aggregated ("bob liked 3 photos") and ranked.
        pairs.extend((f"timeline_aggregated:{key}", f"user:{s}") for s in sources)
        pairs.extend((f"timeline_ranked:{key}", f"user:{s}") for s in sources)
    return pairs


def _fan_follows(
    rng: random.Random, fan_keys: Sequence[str], zipf: _ZipfPicker
) -> list[tuple[str, str]]:
    celebrities = zipf.ranking[: len(_FAN_CELEBRITY_ODDS)]
    pairs: list[tuple[str, str]] = []
    for fan in fan_keys:
        picked = [
            c
            for c, odds in zip(celebrities, _FAN_CELEBRITY_ODDS, strict=True)
            if rng.random() < odds
        ]
        picked += zipf.distinct(rng, rng.choice((0, 0, 1, 1, 2)))
        pairs.extend((f"timeline:{fan}", f"user:{key}") for key in dict.fromkeys(picked))
    return pairs


@dataclass(frozen=True, slots=True)
class _Post:
    object: str
    author: str


class _ActivityMaker:
    """Makes activities in time order, so likes and comments refer to earlier posts."""

    def __init__(self, rng: random.Random, zipf: _ZipfPicker, celebrities: Sequence[str]) -> None:
        self.rng = rng
        self.zipf = zipf
        self.celebrities = list(celebrities)
        self.posts: list[_Post] = []
        self.celebrity_posts: list[_Post] = []
        self.counters: dict[str, itertools.count[int]] = {}

    def stream(
        self, keys: Sequence[str], count: int, *, now: datetime, id_prefix: str
    ) -> list[tuple[str, dict[str, Any]]]:
        actors = self._with_celebrities(
            self.rng.choices(keys, weights=self._activeness(keys), k=count)
        )
        ages = sorted((self.rng.randrange(_WINDOW_SECONDS) for _ in range(count)), reverse=True)
        start = now.replace(microsecond=0)
        out: list[tuple[str, dict[str, Any]]] = []
        for n, (actor, age) in enumerate(zip(actors, ages, strict=True)):
            activity = self.make(actor)
            activity["time"] = start - timedelta(seconds=age)
            activity["foreign_id"] = f"{id_prefix}-{n:06d}"
            out.append((f"user:{actor}", activity))
        return out

    def _activeness(self, keys: Sequence[str]) -> list[float]:
        # Pareto: a few users are very active. Celebrities post steadily but
        # not most: each of their activities fans out to 10,000+ timelines.
        return [
            1.0 if k in self.celebrities else min(8.0, self.rng.paretovariate(1.5)) for k in keys
        ]

    def _with_celebrities(self, actors: list[str]) -> list[str]:
        """``actors`` with each celebrity in a few slots at least: on a small demo
        the draw can leave one out, and the demo shows a celebrity's feed."""
        floor = min(_CELEBRITY_MIN_ACTIVITIES, len(actors) // (4 * len(self.celebrities)))
        for celebrity in self.celebrities:
            missing = floor - actors.count(celebrity)
            for slot in self.rng.sample(range(len(actors)), max(0, missing)):
                actors[slot] = celebrity
        return actors

    def make(self, actor: str) -> dict[str, Any]:
        verb = self.rng.choices(_VERBS, weights=_VERB_WEIGHTS)[0] if self.posts else "post"
        if verb == "post":
            return self._post(actor)
        post = self._pick_post()
        if verb == "comment":
            return self._comment(actor, post)
        return {
            "actor": actor,
            "verb": verb,
            "object": post.object,
            "to": _notify(actor, post.author),
        }

    def _next(self, kind: str) -> int:
        return next(self.counters.setdefault(kind, itertools.count(1)))

    def _post(self, actor: str) -> dict[str, Any]:
        kind = self.rng.choices(_POST_KINDS, weights=_POST_KIND_WEIGHTS)[0]
        post = _Post(f"{kind}:{self._next(kind)}", actor)
        self.posts.append(post)
        if actor in self.celebrities:
            self.celebrity_posts.append(post)
        label = "caption" if kind == "photo" else "text" if kind == "status" else "title"
        extra: dict[str, Any] = {label: self._phrase()}
        activity: dict[str, Any] = {"actor": actor, "verb": "post", "object": post.object}
        if self.rng.random() < 0.1:
            mentioned = self.zipf.one(self.rng)
            extra["mentions"] = [mentioned]
            activity["to"] = _notify(actor, mentioned)
        activity["extra"] = extra
        return activity

    def _comment(self, actor: str, post: _Post) -> dict[str, Any]:
        extra: dict[str, Any] = {"text": self.rng.choice(_REMARKS)}
        notified = [post.author]
        if self.rng.random() < 0.3:
            mentioned = self.zipf.one(self.rng)
            extra["mentions"] = [mentioned]
            notified.append(mentioned)
        return {
            "actor": actor,
            "verb": "comment",
            "object": f"comment:{self._next('comment')}",
            "target": post.object,
            "to": _notify(actor, *notified),
            "extra": extra,
        }

    def _pick_post(self) -> _Post:
        # Attention is skewed twice: towards celebrities and towards what is recent.
        if self.celebrity_posts and self.rng.random() < 0.3:
            return self.rng.choice(self.celebrity_posts[-50:])
        back = min(len(self.posts) - 1, int(self.rng.expovariate(1 / 150)))
        return self.posts[-1 - back]

    def _phrase(self) -> str:
        return f"{self.rng.choice(_ADJECTIVES)} {self.rng.choice(_NOUNS)}"


def _notify(actor: str, *users: str) -> list[str]:
    """Notification feeds of ``users``; nobody is notified of their own doing."""
    return [f"notification:{u}" for u in dict.fromkeys(users) if u != actor]


# -- writing ------------------------------------------------------------------


def _already_seeded(engine: Tidings, plan: DemoPlan) -> bool:
    """Whether an earlier run wrote this whole plan.

    Follows and activities are written in plan order, so when the last of
    each is stored, so is everything before it.
    """
    if not plan.activities or not plan.follows:
        return False
    feed, last = plan.activities[-1]
    try:
        engine.get_activity((feed, last["foreign_id"]))
    except ActivityNotFound:
        return False
    follower, source = plan.follows[-1]
    return _is_following(engine, follower, source)


def _is_following(engine: Tidings, follower: str, source: str) -> bool:
    cursor: str | None = None
    while True:
        page = engine.following(follower, cursor=cursor, limit=100)
        if any(f.source == source for f in page.results):
            return True
        if page.next is None:
            return False
        cursor = page.next


def _create_users(engine: Tidings, people: Sequence[Person]) -> None:
    for person in people:
        try:
            engine.users.create(person.id, person.handle, person.profile)
        except HandleTaken:  # created by an earlier run (or the id is in use): kept
            continue


def _react_all(engine: Tidings, plan: DemoPlan, report: Progress) -> None:
    total = len(plan.reactions)
    report("reactions", 0, total)
    ids: dict[int, str] = {}
    for done, (n, kind, user, text) in enumerate(plan.reactions, 1):
        if n not in ids:
            feed, activity = plan.activities[n]
            ids[n] = engine.get_activity((feed, activity["foreign_id"])).id
        engine.reactions.put(ids[n], kind, user, {"text": text} if text else None)
        if done % 100 == 0 or done == total:
            report("reactions", done, total)


def _follow_all(engine: Tidings, pairs: Sequence[tuple[str, str]], report: Progress) -> int:
    new = 0
    report("follows", 0, len(pairs))
    for start in range(0, len(pairs), MAX_FOLLOW_BATCH):
        # copy_limit=0: follows come before activities, so there is nothing
        # to copy yet, and asking would still cost a query per follow.
        new += len(engine.follow_many(pairs[start : start + MAX_FOLLOW_BATCH], copy_limit=0))
        report("follows", min(start + MAX_FOLLOW_BATCH, len(pairs)), len(pairs))
    return new


def _publish_all(
    engine: Tidings, activities: Sequence[tuple[str, dict[str, Any]]], report: Progress
) -> None:
    total = len(activities)
    report("activities", 0, total)
    # By feed, in batches: one transaction a batch. Every activity carries its
    # time, so the order feeds are published in changes nothing.
    by_feed: dict[str, list[dict[str, Any]]] = {}
    for feed, activity in activities:
        by_feed.setdefault(feed, []).append(activity)
    done = 0
    for feed, items in by_feed.items():
        for start in range(0, len(items), MAX_BATCH):
            batch = items[start : start + MAX_BATCH]
            engine.activities.publish_many(feed, batch)  # a no-op for foreign_ids stored already
            done += len(batch)
            report("activities", done, total)


def _drain(engine: Tidings, report: Progress) -> int:
    """``engine.admin.drain()`` with progress: it runs in a thread while this one counts the outbox."""
    total = engine.admin.pending()
    report("deliveries", 0, total)
    outcome: list[int | BaseException] = []

    def work() -> None:
        try:
            outcome.append(engine.admin.drain())
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append(exc)

    # A daemon thread, so Ctrl-C ends the demo at once; an interrupted
    # delivery resumes from its recorded position on the next run.
    worker = threading.Thread(target=work, name="tidings-demo-drain", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_DRAIN_POLL_SECONDS)
        report("deliveries", max(0, total - engine.admin.pending()), total)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    report("deliveries", total, total)
    return result
