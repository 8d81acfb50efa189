"""Exact paging of ranked feeds while scores change underneath.

Each walk starts at the first page and follows cursors to the end while
likes, unlikes and new activities move scores: every walk shows each
activity that was a candidate at its first page exactly once (no duplicate,
no skip), in the order its first page froze (scores never rise along it).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidings import Settings, Tidings

GROUPS = {"ranked": {"kind": "ranked", "ranking": "likes * 10 + comments - age_hours / 1000"}}
_feeds = itertools.count()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tidings]:
    path: Path = tmp_path_factory.mktemp("ranked") / "t.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIDINGS_CONFIG", str(path.parent / "absent.toml"))
        options: dict[str, Any] = {"timeline_store": "sql", "groups": GROUPS}
        config = Settings(database_url=f"sqlite:///{path}", **options)
        with Tidings(config, task_runner="sync") as made:
            yield made


def _fresh(engine: Tidings, n: int) -> tuple[str, str, list[str]]:
    """A new ranked feed following a new source holding ``n`` activities."""
    k = next(_feeds)
    feed, source = f"ranked:r{k}", f"user:s{k}"
    engine.follow(feed, source)
    made = [
        engine.add_activity(source, {"actor": f"s{k}", "verb": "post", "object": f"n:{i}"}).id
        for i in range(n)
    ]
    return feed, source, made


def _post(engine: Tidings, source: str) -> str:
    actor = source.partition(":")[2]
    return engine.add_activity(source, {"actor": actor, "verb": "post", "object": "n:late"}).id


#: Between two page reads: like / comment / unlike an activity (by position
#: among those made), or publish a new one.
Change = tuple[str, int, int]
changes = st.lists(
    st.tuples(
        st.sampled_from(["like", "comment", "unlike", "post"]),
        st.integers(0, 39),
        st.integers(0, 5),
    ),
    max_size=6,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(limit=st.integers(2, 7), schedule=st.lists(changes, min_size=1, max_size=25))
def test_walks_show_every_candidate_once_while_scores_change(
    engine: Tidings, limit: int, schedule: list[list[Change]]
) -> None:
    feed, source, made = _fresh(engine, 40)
    likes: dict[tuple[int, int], str] = {}
    pages = 0
    steps = iter(schedule * 10)
    while pages < 100:
        candidates = _held(engine, source)
        shown: list[str] = []
        scores: list[float] = []
        cursor = None
        while True:
            page = engine.read(feed, limit, cursor)
            pages += 1
            assert not page.renewed
            shown += [a.id for a in page.results]
            assert page.extras is not None
            scores += [e["score"] for e in page.extras]
            for kind, n, user in next(steps, []):
                _apply(engine, source, made, likes, kind, n, user)
            cursor = page.next
            if cursor is None:
                break
        assert len(shown) == len(set(shown)), "an activity was shown twice"
        assert set(shown) == candidates, "an activity was skipped"
        assert scores == sorted(scores, reverse=True)


def _held(engine: Tidings, source: str) -> set[str]:
    """The ids the ranked feed holds: those of its one source (a flat feed)."""
    out: set[str] = set()
    cursor = None
    while True:
        page = engine.read(source, 100, cursor)
        out.update(a.id for a in page.results)
        if page.next is None:
            return out
        cursor = page.next


def _apply(
    engine: Tidings,
    source: str,
    made: list[str],
    likes: dict[tuple[int, int], str],
    kind: str,
    n: int,
    user: int,
) -> None:
    target = made[n % len(made)]
    if kind == "post":
        made.append(_post(engine, source))
    elif kind == "unlike":
        held = likes.pop((n, user), None)
        if held is not None:
            engine.reactions.remove(held)
    else:
        reaction = engine.reactions.add(target, kind, f"u{user}")
        if kind == "like":
            likes[(n, user)] = reaction.id


def test_a_hundred_pages_while_another_thread_reacts_and_publishes(engine: Tidings) -> None:
    feed, source, made = _fresh(engine, 60)
    stop = threading.Event()
    publishing = threading.Lock()
    errors: list[BaseException] = []

    def writer() -> None:
        i = 0
        try:
            while not stop.is_set():
                i += 1
                engine.reactions.add(made[(i * 7) % len(made)], "like", f"w{i}")
                if i % 5 == 0:
                    with publishing:  # the source and the ranked feed hold it together
                        _post(engine, source)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    pages = walks = 0
    try:
        while pages < 100:
            with publishing:
                candidates = _held(engine, source)
                first = engine.read(feed, 4)
            shown = [a.id for a in first.results]
            pages += 1
            cursor = first.next
            while cursor is not None:
                page = engine.read(feed, 4, cursor)
                pages += 1
                shown += [a.id for a in page.results]
                cursor = page.next
            walks += 1
            assert len(shown) == len(set(shown))
            assert set(shown) == candidates
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert walks >= 2
