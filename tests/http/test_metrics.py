"""``/metrics`` of one process: the series a scrape reports, as Prometheus
text, over a real server and real stores."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from http_server import LiveApi, live_api
from scrape import samples, total, value
from tidings.http.metrics import BUCKETS, Metrics, StoreErrorLog
from waiting import wait_until

# One server each (~0.3 s), the last test none.


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LiveApi]:
    with live_api("sql", f"sqlite:///{tmp_path / 'm.db'}", sse_heartbeat_seconds=0.2) as made:
        yield made


@pytest.fixture
def client(api: LiveApi) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api.url, headers=api.headers(), timeout=10) as c:
        yield c


def scrape(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    # A connection of its own, no token needed.
    r = httpx.get(client.base_url.join("/metrics"), timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(r.text)


POST = "/v1/feeds/{group}/{key}/activities"
PAGE = "/v1/feeds/{group}/{key}"
NOTE = {"actor": "bob", "verb": "post", "object": "note:1"}


def test_requests_publishes_deliveries_and_the_outbox(client: httpx.Client) -> None:
    # Given a follower, two publishes (one repeating a foreign_id), two reads
    # and a request for no route
    assert client.post("/v1/feeds/timeline/al/follows", json={"source": "user:bob"}).is_success
    for status in (201, 200):
        r = client.post("/v1/feeds/user/bob/activities", json={**NOTE, "foreign_id": "n:1"})
        assert r.status_code == status
    client.get("/v1/feeds/timeline/al")
    client.get("/v1/feeds/timeline/al")
    client.get("/no/such/route")
    # When it is scraped
    table = scrape(client)
    # Then requests are counted by method, route template and status
    requests = "tidings_http_requests_total"
    assert value(table, requests, method="POST", route=POST, status="201") == 1
    assert value(table, requests, method="POST", route=POST, status="200") == 1
    assert value(table, requests, method="GET", route=PAGE, status="200") == 2
    assert value(table, requests, method="GET", route="unmatched", status="404") == 1
    # and timed: buckets cumulative, +Inf the count
    page = {"method": "GET", "route": PAGE}
    bounds = [str(b) for b in BUCKETS] + ["+Inf"]
    buckets = [value(table, "tidings_http_request_seconds_bucket", **page, le=b) for b in bounds]
    assert buckets == sorted(buckets)
    assert buckets[-1] == 2 == value(table, "tidings_http_request_seconds_count", **page)
    assert value(table, "tidings_http_request_seconds_sum", **page) > 0
    # the repeated foreign_id is not a new publish; its delivery was carried out
    assert value(table, "tidings_activities_published_total") == 1
    assert value(table, "tidings_deliveries_done_total") == 1
    assert value(table, "tidings_deliveries_pending") == 0
    assert value(table, "tidings_outbox_lag_seconds") == 0
    # nothing went wrong with a store, nobody listens live, the bus keeps up
    assert total(table, "tidings_store_errors_total") == 0
    assert total(table, "tidings_live_connections") == 0
    assert value(table, "tidings_bus_lag_seconds") == 0
    assert value(table, "tidings_bus_backlog") == 0
    # and no series prometheus_client would add for each counter's start
    assert not [name for name, _ in table if name.endswith("_created")]


def test_a_request_a_store_fails_counts_as_a_store_error(
    api: LiveApi, client: httpx.Client, tmp_path: Path
) -> None:
    # Given a database whose feed entries are gone (dropped behind the engine's back)
    client.get("/v1/feeds/timeline/al")
    with sqlite3.connect(tmp_path / "m.db") as db:
        db.execute("DROP TABLE tidings_feed_entries")
    # When a read needs them
    assert client.get("/v1/feeds/timeline/al").status_code == 500
    # Then the request is counted as a 500 and as the driver's error
    table = scrape(client)
    assert value(table, "tidings_http_requests_total", method="GET", route=PAGE, status="500") == 1
    errors = value(table, "tidings_store_errors_total", store="sqlite", kind="OperationalError")
    assert errors >= 1  # (the read's; background work may log more)


def test_live_connections_are_counted_while_open(api: LiveApi, client: httpx.Client) -> None:
    def open_now(transport: str) -> float:
        return value(scrape(client), "tidings_live_connections", transport=transport)

    # Given an SSE stream and a WebSocket open
    with client.stream("GET", "/v1/feeds/timeline/al/events") as stream:
        lines = stream.iter_lines()  # (kept: dropping it would close the stream)
        assert next(lines) == ": connected"
        url = api.url.replace("http", "ws") + "/v1/stream"
        with ws_connect(url, additional_headers=api.headers()):
            # Then each is counted under its transport
            assert open_now("sse") == 1
            assert open_now("websocket") == 1
        # When each ends, it is not (the server notices a WebSocket closing
        # at once, an SSE client gone at its next heartbeat)
        wait_until(lambda: open_now("websocket") == 0, what="for the WebSocket's end")
    wait_until(lambda: open_now("sse") == 0, what="for the SSE stream's end")


@pytest.fixture
def lone_logger() -> Iterator[logging.Logger]:
    """A logger no other handler serves (as tidings' logger is under uvicorn,
    which configures only its own), as it was after."""
    logger = logging.getLogger("metrics-test.background")
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.handlers.clear()
        logger.propagate = True


def test_store_failures_logged_are_counted_and_still_written(
    lone_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the handlers of two apps on a logger no other handler serves
    metrics, other = Metrics(), Metrics()
    logger = lone_logger
    # (Set, not added: pytest's capture may have put handlers of its own there.)
    logger.handlers[:] = [StoreErrorLog(metrics), StoreErrorLog(other)]
    # When a store's failure and another one are logged with their exceptions
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM missing")
    except sqlite3.Error:
        logger.exception("a delivery failed")
    try:
        raise KeyError("a failure that is not a store's")
    except KeyError:
        logger.exception("something else failed")
    logger.error("no exception at all")
    # Then the store's is counted, by store and kind, by each app; the others are not
    for counted in (metrics, other):
        table = samples(counted.render_series().decode())
        sqlite = {"store": "sqlite", "kind": "OperationalError"}
        assert value(table, "tidings_store_errors_total", **sqlite) == 1
        assert total(table, "tidings_store_errors_total") == 1
    # and each is still written, once, where it would be without the handlers
    err = capsys.readouterr().err
    for message in ("a delivery failed", "something else failed", "no exception at all"):
        assert err.count(message) == 1, err


def test_a_scrape_leaves_out_a_file_a_process_is_creating(tmp_path: Path) -> None:
    # prometheus_client creates a process's file, then sizes it: a scrape in
    # between found it empty and failed whole (a 500 while a worker started).
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "counter_4242.db").touch()
    (shared / "gauge_livesum_4242.db").touch()
    text = Metrics(shared=str(shared)).render_series()
    assert isinstance(text, bytes)
