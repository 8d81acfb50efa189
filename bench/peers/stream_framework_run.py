"""Stream Framework's side of the peer bench; runs in Stream Framework's own venv.

``bench/peer.py`` builds that venv (PyPI's ``stream-framework`` 1.4.0 with
``redis==2.10.6``, Celery 5, ``six``) and runs this file with its python, so
nothing here may import tidings or the bench package:

    python stream_framework_run.py WORKLOAD.json redis://127.0.0.1:PORT/0

WORKLOAD.json is ``{"follows": [[follower, source], ...], "publishers": [user, ...]}``.
The feeds are set up the way Stream Framework's README shows: a user feed and
a timeline feed per user, both ``RedisFeed``s, and the standard ``Manager``
whose Celery fan-out tasks run eagerly, so a fan-out is done when
``add_user_activity`` returns. One activity is published per entry of
``publishers``, timed; the result is one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import platform
import random
import re
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import urlsplit

import redis

from celery import Celery

# Celery 5's own names for CELERY_ALWAYS_EAGER / CELERY_EAGER_PROPAGATES_EXCEPTIONS,
# which Stream Framework's docs and test fixture set: its fan-out tasks then
# run inside ``delay()`` and their errors reach the caller. Celery (5.7 here)
# serializes an eager task's arguments as it would for a worker, and Stream
# Framework's are objects (the manager, the feed class, the operation
# function, the activities), written for Celery 3 whose default serializer
# was pickle: so pickle. The in-memory broker is never used by eager tasks;
# it only keeps Celery from looking for an AMQP server.
app = Celery("stream_framework_peer", set_as_current=True)
app.conf.update(
    task_always_eager=True,
    task_eager_propagates=True,
    task_serializer="pickle",
    accept_content=["pickle"],
    broker_url="memory://",
)

from stream_framework import settings  # type: ignore[import-not-found]  # noqa: E402
from stream_framework.activity import Activity  # type: ignore[import-not-found]  # noqa: E402
from stream_framework.feeds.redis import RedisFeed  # type: ignore[import-not-found]  # noqa: E402
from stream_framework.verbs.base import Add  # type: ignore[import-not-found]  # noqa: E402

MANAGER_MODULE = "stream_framework.feed_managers.base"
# Keys outside the graph's users, for the warm-up publishes.
WARM_ACTOR = -1
WARM_FOLLOWERS = 100
WARM_PUBLISHES = 3


def import_manager_module() -> ModuleType:
    """``stream_framework.feed_managers.base``, on Python 3.7+ also from PyPI's 1.4.0.

    1.4.0 names a parameter ``async`` (``follow_user(..., async=True)``), a
    keyword since Python 3.7, so the module does not compile there. GitHub
    HEAD renamed it to ``async_`` (commits 930ac91 and f7e1f2b, after the last
    release); the same rename is applied to the installed source as it is
    loaded, the file on disk left as pip installed it. A version whose module
    compiles (GitHub HEAD) is imported unchanged.
    """
    try:
        return importlib.import_module(MANAGER_MODULE)
    except SyntaxError:
        pass
    spec = importlib.util.find_spec(MANAGER_MODULE)
    if spec is None or spec.loader is None or spec.origin is None:
        raise ImportError(MANAGER_MODULE)
    source = Path(spec.origin).read_text(encoding="utf-8")
    code = compile(re.sub(r"\basync\b", "async_", source), spec.origin, "exec")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MANAGER_MODULE] = module
    exec(code, module.__dict__)
    return module


feed_managers: Any = import_manager_module()


class TimelineFeed(RedisFeed):  # type: ignore[misc]
    """What a user reads: the activities of the users they follow."""

    key_format = "feed:normal:%(user_id)s"


class UserFeed(TimelineFeed):
    """A user's own activities (the README's ``UserPinFeed``)."""

    key_format = "feed:user:%(user_id)s"


# The application's follow table: followers by source. Stream Framework
# stores no follows; ``get_user_follower_ids`` is the application's query (a
# Django ``Follow`` table in the README). Kept outside the manager, which is
# pickled into every fan-out task as an application's stateless manager is.
FOLLOWERS: dict[int, list[int]] = {}


class PeerManager(feed_managers.Manager):  # type: ignore[misc]
    """The standard Manager with the README's feeds.

    A follow is made by adding it to FOLLOWERS: ``follow_user`` would only
    back-fill the follower's feeds from the source's past activities, of
    which there are none before the timed publishes.
    """

    feed_classes: ClassVar[dict[str, type[Any]]] = {"normal": TimelineFeed}
    user_feed_class = UserFeed

    def get_user_follower_ids(self, user_id: int) -> dict[str, list[int]]:
        return {feed_managers.FanoutPriority.HIGH: FOLLOWERS.get(user_id, [])}


def configure_redis(url: str) -> redis.StrictRedis:
    """Point Stream Framework's ``default`` Redis server at ``url``.

    Without Django its settings are the module ``stream_framework.settings``
    (the defaults); the connection pool is made from STREAM_REDIS_CONFIG on
    first use, so it is set before any feed touches Redis.
    """
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    db, password = int(parts.path.strip("/") or 0), parts.password
    settings.STREAM_REDIS_CONFIG = {
        "default": {"host": host, "port": port, "db": db, "password": password}
    }
    return redis.StrictRedis(host=host, port=port, db=db, password=password)


def load_workload(path: Path) -> tuple[dict[int, list[int]], list[int]]:
    """Followers per source and the publishers, with users numbered in order of appearance.

    Stream Framework's activities carry integer actor and object ids (its
    serializer writes them as decimal numbers), so user names become ints.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    ids: dict[str, int] = {}
    followers: dict[int, list[int]] = {}
    for follower, source in data["follows"]:
        f = ids.setdefault(follower, len(ids))
        s = ids.setdefault(source, len(ids))
        followers.setdefault(s, []).append(f)
    publishers = [ids.setdefault(user, len(ids)) for user in data["publishers"]]
    return followers, publishers


def publish(manager: Any, actor: int, object_id: int) -> None:
    activity = Activity(actor, Add, object_id)
    manager.add_user_activity(actor, activity)


def zadd_calls(client: redis.StrictRedis) -> int:
    return int(client.info("commandstats").get("cmdstat_zadd", {}).get("calls", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", type=Path)
    parser.add_argument("redis_url")
    args = parser.parse_args()
    followers, publishers = load_workload(args.workload)
    client = configure_redis(args.redis_url)
    first_free = 1 + max([*followers, *(f for fs in followers.values() for f in fs), *publishers])

    # Feeds trim themselves at random (RedisFeed.trim_chance): a fixed seed
    # makes every run do the same trims.
    random.seed(0)
    # Warm-up on feeds outside the graph: imports, connection pool, Celery's
    # task registry and the verb registry are set up before the clock starts.
    warm = list(range(first_free, first_free + WARM_FOLLOWERS))
    FOLLOWERS.update(followers)
    FOLLOWERS[WARM_ACTOR] = warm
    manager = PeerManager()
    for n in range(WARM_PUBLISHES):
        publish(manager, WARM_ACTOR, n)

    entries = sum(len(followers.get(p, ())) for p in publishers)
    client.config_resetstat()
    start, cpu_start = time.perf_counter(), time.process_time()
    for n, actor in enumerate(publishers, start=WARM_PUBLISHES):
        publish(manager, actor, n)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start

    # Each follower's timeline gets its own ZADD (the Redis timeline storage
    # does not use the fan-out's batch pipeline), and each publish one more
    # for the user feed: the server's count proves every entry was written.
    written = zadd_calls(client) - len(publishers)
    if written != entries:
        raise SystemExit(f"expected {entries} timeline ZADDs, Redis counted {written}")
    result = {
        "activities": len(publishers),
        "seconds": seconds,
        "activities_per_s": len(publishers) / seconds,
        "entries": entries,
        "entries_per_s": entries / seconds,
        # This process's CPU time: with other work on the machine, seconds
        # grow with the time spent waiting for a core, this much less.
        "cpu_seconds": cpu_seconds,
        "versions": {
            name: importlib.metadata.version(name)
            for name in ("stream-framework", "redis", "celery", "six")
        }
        | {"python": platform.python_version()},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
