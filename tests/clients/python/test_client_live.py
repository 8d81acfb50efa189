"""Live events through the client: a feed's events and the firehose, sync and
async, resumed after a dropped connection (a relay cuts it) and across a
server restart (PostgreSQL + Redis) with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from client_services import SERVER_TOKEN, Relay, Service
from tidings_client import AsyncClient, Client, Event, EventStream
from tidings_client.types import ActivityIn


def note(n: int, actor: str = "bob") -> ActivityIn:
    return {"actor": actor, "verb": "post", "object": f"note:{n}"}


class Collector:
    """Iterates ``stream`` in a thread until ``count`` events came."""

    def __init__(self, stream: EventStream, count: int) -> None:
        self.stream, self.count, self.events = stream, count, list[Event]()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait_until(lambda: stream.connected or not self.thread.is_alive())

    def _run(self) -> None:
        for event in self.stream:
            self.events.append(event)
            if len(self.events) >= self.count:
                return

    def ids(self, timeout: float = 60) -> list[str]:
        """The activity ids of the events, once all came."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{len(self.events)} of {self.count} events came"
        return [str(e.data.get("id")) for e in self.events]


def wait_until(probe: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not probe():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not so in time"
        time.sleep(0.02)


@pytest.fixture
def client(tidings_service: Service) -> Iterator[Client]:
    with Client(tidings_service.url, SERVER_TOKEN) as made:
        yield made


def test_a_feeds_events_in_order(client: Client) -> None:
    with client.events("user:live1") as stream:
        got = Collector(stream, 3)
        sent = [client.publish("user:live1", note(n))["id"] for n in range(3)]
        assert got.ids() == sent
    assert {e.type for e in got.events} == {"activity.added"}
    assert stream.last_event_id == got.events[-1].id


def test_a_dropped_connection_resumes_with_no_gap_and_no_duplicate(
    client: Client, relay: Relay
) -> None:
    with Client(relay.url, SERVER_TOKEN) as through, through.events("user:live2") as stream:
        got = Collector(stream, 10)
        sent = [client.publish("user:live2", note(n))["id"] for n in range(5)]
        wait_until(lambda: len(got.events) == 5)
        relay.cut()
        # Published while the client is away: replayed when it comes back.
        sent += [client.publish("user:live2", note(n))["id"] for n in range(5, 10)]
        assert got.ids() == sent
    assert relay.accepted >= 2


def test_a_stream_resumes_after_the_id_it_is_given(client: Client) -> None:
    first = [client.publish("user:live3", note(n)) for n in range(2)]
    with client.events("user:live3") as stream:
        got = Collector(stream, 1)
        client.publish("user:live3", note(2))
        got.ids()
        seen = stream.last_event_id
    later = [client.publish("user:live3", note(n))["id"] for n in range(3, 6)]
    with client.events("user:live3", last_event_id=seen) as resumed:
        assert Collector(resumed, 3).ids() == later
    assert first


def test_the_firehose_reconnects_after_a_dropped_connection(client: Client, relay: Relay) -> None:
    with Client(relay.url, SERVER_TOKEN) as through, through.firehose(follow="hose") as stream:
        got = Collector(stream, 4)
        sent = [client.publish("user:hose", note(n, "hose"))["id"] for n in range(2)]
        wait_until(lambda: len(got.events) == 2)
        relay.cut()
        # The firehose has no replay: what comes after the reconnection is seen.
        wait_until(lambda: relay.accepted >= 2 and stream.connected)
        sent += [client.publish("user:hose", note(n, "hose"))["id"] for n in range(2, 4)]
        assert got.ids() == sent


def test_async_events_and_firehose(tidings_service: Service) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with AsyncClient(tidings_service.url, SERVER_TOKEN) as client:
            events, hose = client.events("user:alive"), client.firehose(track="async")
            got: dict[str, list[str]] = {"events": [], "hose": []}

            async def take(stream: object, into: list[str], count: int) -> None:
                async for event in stream:  # type: ignore[attr-defined]
                    into.append(str(event.data["id"]))
                    if len(into) == count:
                        return

            tasks = [
                asyncio.create_task(take(events, got["events"], 3)),
                asyncio.create_task(take(hose, got["hose"], 3)),
            ]
            while not (events.connected and hose.connected):
                await asyncio.sleep(0.02)
            sent = []
            for n in range(3):
                activity = note(n) | {"extra": {"text": "async words"}}
                sent.append((await client.publish("user:alive", activity))["id"])
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
            await events.aclose()
            await hose.aclose()
            return sent, got["events"], got["hose"]

    sent, events, hose = asyncio.run(scenario())
    assert events == sent
    assert hose == sent


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["crash", "shutdown"])
def test_a_stream_resumes_across_a_server_restart(pg_redis_service: Service, stop: int) -> None:
    service = pg_redis_service
    with Client(service.url, SERVER_TOKEN) as client, client.events("timeline:rita") as stream:
        client.follow("timeline:rita", "user:sam")
        got = Collector(stream, 8)
        sent = [client.publish("user:sam", note(n, "sam"))["id"] for n in range(3)]
        wait_until(lambda: len(got.events) == 3)
        service.restart(stop)
        # Published before the client is back: replayed from Redis by id.
        sent += [client.publish("user:sam", note(n, "sam"))["id"] for n in range(3, 8)]
        assert got.ids() == sent
        assert "resync" not in {e.type for e in got.events}


@pytest.mark.postgres
@pytest.mark.redis
def test_main_flows_on_postgres_and_redis(pg_redis_service: Service) -> None:
    async def scenario() -> None:
        async with AsyncClient(pg_redis_service.url, SERVER_TOKEN) as client:
            await client.create_user("pat", "Pat")
            await client.follow_many([("timeline:quin", "user:pat"), ("timeline:rob", "user:pat")])
            batch = [note(n, "pat") | {"foreign_id": f"pg{n}"} for n in range(5)]
            await client.publish_batch("user:pat", batch)
            for _ in range(200):
                if len((await client.read("timeline:quin"))["results"]) == 5:
                    break
                await asyncio.sleep(0.05)
            pages = [p async for p in client.pages("timeline:quin", limit=2)]
            assert [len(p["results"]) for p in pages] == [2, 2, 1]
            ids = [a["id"] async for a in client.activities("timeline:rob", limit=3)]
            assert len(set(ids)) == 5
            assert (await client.feed_stats("user:pat"))["followers"] == 2
            assert (await client.get_user("pat"))["counts"]["activities"] == 5

    asyncio.run(scenario())
