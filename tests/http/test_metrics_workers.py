"""``/metrics`` of ``tidings serve --workers 2``: whichever worker a scrape
reaches, it reports both (prometheus_client's multiprocess mode, in a
directory private to the server)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from http_server import tidings_serve
from scrape import Key, samples, total, value
from tidings.http.auth import mint
from waiting import wait_until

# One server of two workers, ~3 s to start on an idle machine; ~2 s of load
# and scrapes.
pytestmark = pytest.mark.timeout(240)

SECRET = "metrics-workers-secret-0123456789abcdef"
POST = "/v1/feeds/{group}/{key}/activities"
PAGE = "/v1/feeds/{group}/{key}"
REQUESTS = "tidings_http_requests_total"
#: Series that only grow: counters and the parts of histograms.
GROWING = ("_total", "_bucket", "_count", "_sum")


def per_worker(shared: Path) -> dict[int, float]:
    """Each worker's own count of publishes and page reads, from its file."""
    counts = {}
    for path in shared.glob("counter_*.db"):
        pid = int(path.stem.rpartition("_")[2])
        families = MultiProcessCollector.merge([str(path)])
        counts[pid] = sum(
            s.value
            for family in families
            for s in family.samples
            if s.name == REQUESTS and s.labels["route"] in (POST, PAGE)
        )
    return counts


def test_a_scrape_of_either_worker_reports_the_whole_server(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    headers = {"Authorization": f"Bearer {mint(SECRET, '*', server=True)}"}
    sent: Counter[str] = Counter()
    lock = threading.Lock()

    # (Two workers import everything at once: on a busy two-core machine,
    # that alone took over 30 s.)
    with tidings_serve(
        tmp_path, "--workers", "2", secret=SECRET, env={"TMPDIR": str(tmp)}, startup_seconds=90
    ) as server:
        [shared] = tmp.glob("tidings-metrics-*")  # made by the server, before its workers
        # (/healthz answered once one worker was up; the other may still be starting.)
        wait_until(
            lambda: server.stderr.read_text().count("Application startup complete") == 2,
            60,
            "for both workers to start",
        )

        def request(n: int) -> None:
            # A connection each (no client kept): the kernel hands each to either worker.
            if n % 2:
                r = httpx.post(
                    f"{server.url}/v1/feeds/user/u{n % 7}/activities",
                    json={"actor": f"u{n % 7}", "verb": "post", "object": f"note:{n}"},
                    headers=headers,
                )
                assert r.status_code == 201, r.text
                kind = "publish"
            else:
                r = httpx.get(f"{server.url}/v1/feeds/user/u{n % 7}", headers=headers)
                assert r.status_code == 200, r.text
                kind = "read"
            with lock:
                sent[kind] += 1

        stop = threading.Event()
        failures: list[BaseException] = []

        def load(offset: int) -> None:
            n = offset
            try:
                while not stop.is_set():
                    request(n)
                    n += 3
            except BaseException as exc:
                failures.append(exc)

        def scrape() -> dict[Key, float]:
            r = httpx.get(f"{server.url}/metrics")
            assert r.status_code == 200
            return samples(r.text)

        # Given three clients publishing and reading all along
        threads = [threading.Thread(target=load, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        try:
            # When /metrics is scraped twice, a second apart, under that load
            first = scrape()
            time.sleep(1.0)
            second = scrape()
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert not failures, failures

        # Then no total went down, and the load shows in them
        for key, before in first.items():
            if key[0].endswith(GROWING):
                assert second.get(key, 0.0) >= before, key
        posts = {"method": "POST", "route": POST, "status": "201"}
        assert value(second, REQUESTS, **posts) > value(first, REQUESTS, **posts)

        # Given both workers have served some of the requests (the kernel may
        # favour one for a while: a few more, each on a new connection, if so)
        n = 1_000
        while len([c for c in per_worker(shared).values() if c]) < 2:
            assert n < 1_200, f"one worker took every connection: {per_worker(shared)}"
            request(n)
            n += 1
        # Then any scrape reports every request either worker served
        final = scrape()
        assert value(final, REQUESTS, **posts) == sent["publish"]
        reads = {"method": "GET", "route": PAGE, "status": "200"}
        assert value(final, REQUESTS, **reads) == sent["read"]
        assert sum(per_worker(shared).values()) == sent["publish"] + sent["read"]
        assert value(final, "tidings_activities_published_total") == sent["publish"]
        assert total(final, "tidings_http_request_seconds_count", route=POST) == sent["publish"]

        # and the deliveries both workers' runners carried out, once each
        # has sampled its own (every second)
        def delivered() -> bool:
            table = scrape()
            done = value(table, "tidings_deliveries_done_total")
            return done == sent["publish"] and value(table, "tidings_deliveries_pending") == 0

        wait_until(delivered, 15, "for every delivery to be reported")

    # The server's directory goes with it
    assert not shared.exists()
