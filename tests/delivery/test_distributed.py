"""Outbox rows split into parts (what the Celery runner hands out), on every store,
without a broker: the parts are run here, in any order and more than once."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import update

from conftest import EngineFactory
from tidings import Tidings
from tidings.canonical.rows import Part
from tidings.canonical.schema import follows, outbox
from tidings.core.fanout import Strategy
from tidings.core.limits import LEASE_MS


def add_follows(engine: Tidings, source: str, count: int) -> list[str]:
    followers = [f"timeline:f{i:05d}" for i in range(count)]
    with engine.db.write() as conn:
        conn.execute(
            follows.insert(),
            [{"follower": f, "source": source, "created_ms": 0} for f in followers],
        )
    engine.canonical.follows.recount([source])
    return followers


def lapse_lease(engine: Tidings, row_id: int) -> None:
    """As if the dispatcher's lease on the row had run out."""
    with engine.db.write() as conn:
        conn.execute(update(outbox).where(outbox.c.id == row_id).values(lease_until_ms=0))


def test_parts_cover_every_follower_once_in_any_order(make_engine: EngineFactory) -> None:
    # Given 1,050 followers and parts of 100
    engine = make_engine(task_runner="manual", delivery_chunk_size=100)
    followers = add_follows(engine, "user:bob", 1050)
    activity = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
    sent: list[Part] = []

    def send(parts: Sequence[Part]) -> None:
        sent.extend(parts)

    # When the row is dispatched, and dispatched again after its lease lapsed
    assert engine.deliverer.distributed.dispatch_pending(send, LEASE_MS) == 1
    assert len(sent) == 11
    assert sent[0].after == ""
    assert sent[-1].last is None
    lapse_lease(engine, sent[0].row_id)
    engine.deliverer.distributed.dispatch_pending(send, LEASE_MS)
    # Then the same parts are sent again, none changed
    assert sent[11:] == sent[:11]
    # And running them in reverse order, each twice, delivers each follower once
    completed = [engine.deliverer.distributed.run_part(p) for p in reversed(sent)]
    assert completed.count(True) == 1
    assert engine.admin.pending() == 0
    for feed in (followers[0], followers[99], followers[100], followers[-1]):
        assert [a.id for a in engine.read(feed).results] == [activity.id]


def test_a_redispatch_sends_only_undone_parts(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual", delivery_chunk_size=100)
    add_follows(engine, "user:bob", 250)
    engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
    sent: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(sent.extend, LEASE_MS)
    assert not engine.deliverer.distributed.run_part(sent[1])
    lapse_lease(engine, sent[0].row_id)
    again: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(again.extend, LEASE_MS)
    assert again == [sent[0], sent[2]]


def test_a_source_without_followers_completes_at_dispatch(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual")
    activity = engine.add_activity(
        "user:bob", {"actor": "bob", "verb": "post", "object": "p", "to": ["timeline:carol"]}
    )
    sent: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(sent.extend, LEASE_MS)
    assert sent == []
    assert engine.admin.pending() == 0
    assert [a.id for a in engine.read("timeline:carol").results] == [activity.id]


def test_removing_the_activity_turns_its_parts_into_no_ops(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual", delivery_chunk_size=100)
    followers = add_follows(engine, "user:bob", 150)
    activity = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
    sent: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(sent.extend, LEASE_MS)
    engine.remove_activity("user:bob", activity.id)
    assert not any(engine.deliverer.distributed.run_part(p) for p in sent)
    engine.admin.drain()  # the retraction
    assert engine.read(followers[0]).results == []


def test_parts_of_a_pulled_source_skip_its_flat_followers(make_engine: EngineFactory) -> None:
    engine = make_engine(task_runner="manual", delivery_chunk_size=100, pull_grace_seconds=0)
    followers = add_follows(engine, "user:bob", 150)
    engine.canonical.fanout.set_strategy("user:bob", Strategy.PULL, engine.clock.ms())
    engine.follow("timeline_aggregated:zed", "user:bob")
    activity = engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "p"})
    sent: list[Part] = []
    engine.deliverer.distributed.dispatch_pending(sent.extend, LEASE_MS)
    for part in sent:
        engine.deliverer.distributed.run_part(part)
    assert engine.admin.pending() == 0
    cap = engine.deliverer.cap("timeline")
    assert engine.timeline.page(followers[0], limit=5, before=None, cap=cap) == []
    # Readers merge it all the same; aggregated followers are still pushed.
    assert [a.id for a in engine.read(followers[0]).results] == [activity.id]
    aggregates = engine.read_aggregates("timeline_aggregated:zed").results
    assert [a.id for g in aggregates for a in g.activities] == [activity.id]
