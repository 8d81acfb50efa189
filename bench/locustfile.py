"""Locust users against the local cluster: the everyday mix of a social app.

Run headless by ``bench/load.py`` (``python -m bench --only load``), or by
hand against a cluster that is up and seeded::

    source .cluster/cluster.env
    LOAD_USERS=1000 locust -f bench/locustfile.py --headless -u 32 -t 2m \\
        --host "${CLUSTER_SERVE_URLS%% *}"

Each Locust user acts as a person of the seeded graph (``u0001``...,
``tidings demo``'s keys) with that person's user token for a session of
``SESSION`` requests, then as another person drawn at random, so that the
run sees many people act and not the same few. It sends its requests back
to back, alternating between the serve ports as a round-robin proxy would,
and sends a request a port refused (its server killed) to the other one:

=====================  ======  ==================================================
request                weight  what
=====================  ======  ==================================================
read flat              45      ``GET /v1/feeds/timeline/<me>?limit=25``
read grouped           25      ``GET /v1/feeds/timeline_aggregated/<me>?limit=25``
read ranked            15      ``GET /v1/feeds/timeline_ranked/<me>?limit=25``
publish                8       a post into ``user:<me>``, ``extra.sent_at`` its send time
reaction               3       a like on an activity the user last read
follow                 2       ``timeline:<me>`` follows a random ``user:<key>``
seen/read              2       mark ``notification:<me>`` seen, or read
=====================  ======  ==================================================

Environment: ``CLUSTER_SERVE_URLS`` (space-separated), ``TIDINGS_SECRET``,
``LOAD_USERS`` (how many people the graph has), ``LOAD_STATUS_FILE``:
where the count of every response status per request type is written as
JSON when Locust quits (Locust's own statistics do not tell a 500 from a
503), and ``LOAD_ACKED_FILE``: where every acknowledged publish (feed,
``foreign_id``, the id it was answered with) is written then, for
``bench/acked.py`` to find each stored once.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from locust import FastHttpUser, events, task
from locust.contrib.fasthttp import FAILURE_EXCEPTIONS
from locust.env import Environment

from tidings.http.auth import mint

URLS = os.environ.get("CLUSTER_SERVE_URLS", "http://127.0.0.1:8000").split()
SECRET = os.environ.get("TIDINGS_SECRET", "")
PEOPLE = int(os.environ.get("LOAD_USERS", "1000"))
STATUS_FILE = os.environ.get("LOAD_STATUS_FILE")
ACKED_FILE = os.environ.get("LOAD_ACKED_FILE")
PAGE = 25
#: Requests a Locust user makes as one person before it becomes another.
SESSION = 20
#: Activity ids a user keeps from its last reads, to react to.
KEPT_IDS = 20

#: How a request refused by one port, and sent to the other, is named.
SENT_ON = "(refused: sent to the other serve)"
#: ``{request name: {status: count}}``; status 0 is a request that got no
#: response (a connection refused or reset).
STATUSES: dict[str, Counter[int]] = {}
#: Every publish answered 2xx: ``[feed, foreign_id, id]``.
ACKNOWLEDGED: list[list[str]] = []
_ports = itertools.count()


def person(n: int) -> str:
    """The key of the ``n``-th person (from 1) of ``tidings demo``'s graph."""
    return f"u{n:04d}"


def _count_status(name: str, response: Any = None, **_: Any) -> None:
    status = getattr(response, "status_code", 0) or 0
    STATUSES.setdefault(name, Counter())[int(status)] += 1


def _write_statuses(environment: Environment, **_: Any) -> None:
    if STATUS_FILE:
        data = {name: dict(counts) for name, counts in STATUSES.items()}
        Path(STATUS_FILE).write_text(json.dumps(data, indent=2))
    if ACKED_FILE:
        Path(ACKED_FILE).write_text(json.dumps(ACKNOWLEDGED))


# (Locust's event hooks are not typed.)
events.request.add_listener(_count_status)  # type: ignore[no-untyped-call]
events.quitting.add_listener(_write_statuses)  # type: ignore[no-untyped-call]


class FeedUser(FastHttpUser):
    """One person reading, posting, reacting, following, marking seen."""

    # The host is only Locust's default: every request names its port.
    host = URLS[0]

    def on_start(self) -> None:
        self.turn = next(_ports)
        self._become_someone()

    def _become_someone(self) -> None:
        self.me = person(random.randint(1, PEOPLE))
        token = mint(SECRET, self.me, ttl_seconds=3_600)
        self.headers = {"Authorization": f"Bearer {token}"}
        self.seen_ids: list[str] = []
        self.requests_left = SESSION

    def _next(self) -> None:
        """Count a request of the session (each task's first step: the person
        it acts as must not change between its path and its token)."""
        self.requests_left -= 1
        if self.requests_left < 0:
            self._become_someone()

    def _send(self, method: str, path: str, name: str, body: Any = None) -> Any:
        """``method path`` on the next serve port in turn; the response.

        A port that refuses the connection (its server killed, or starting
        again) never got the request: it goes to the other port, as a proxy
        retries, counted under ``"<name> (refused: sent to the other serve)"``
        and not as a failure. A read is also sent on after a connection cut
        mid-request (a GET changes nothing); a write is not (it may have been
        carried out): that one counts as no answer (status 0).
        """
        for attempt in range(len(URLS)):
            self.turn += 1
            url = URLS[self.turn % len(URLS)] + path
            with self.client.request(
                method, url, name=name, json=body, headers=self.headers, catch_response=True
            ) as got:
                error = getattr(got, "error", None) if got.status_code == 0 else None
                retried = isinstance(error, ConnectionRefusedError) or (
                    method == "GET" and isinstance(error, FAILURE_EXCEPTIONS)
                )
                if retried and attempt < len(URLS) - 1:
                    got.request_meta["name"] = f"{name} {SENT_ON}"
                    got.success()
                    continue
            return got
        raise AssertionError("unreachable: the last attempt returns")

    def _read(self, group: str, name: str) -> None:
        got = self._send("GET", f"/v1/feeds/{group}/{self.me}?limit={PAGE}", name)
        if got.status_code in (200, 206) and got.text:
            self._keep(json.loads(got.text).get("results", []))

    def _keep(self, results: list[dict[str, Any]]) -> None:
        ids = [r["id"] for r in results if "id" in r and "activities" not in r]
        for group in results:  # a grouped page holds its activities inside
            ids += [a["id"] for a in group.get("activities", [])]
        if ids:
            self.seen_ids = ids[:KEPT_IDS]

    @task(45)
    def read_flat(self) -> None:
        self._next()
        self._read("timeline", "read flat")

    @task(25)
    def read_grouped(self) -> None:
        self._next()
        self._read("timeline_aggregated", "read grouped")

    @task(15)
    def read_ranked(self) -> None:
        self._next()
        self._read("timeline_ranked", "read ranked")

    @task(8)
    def publish(self) -> None:
        self._next()
        post = uuid.uuid4().hex
        foreign_id = f"load-{post}"
        body = {
            "actor": self.me,
            "verb": "post",
            "object": f"status:{post}",
            "foreign_id": foreign_id,
            "extra": {"sent_at": time.time()},
        }
        got = self._send("POST", f"/v1/feeds/user/{self.me}/activities", "publish", body)
        if 200 <= got.status_code < 300 and got.text:
            stored = json.loads(got.text)
            ACKNOWLEDGED.append([f"user:{self.me}", foreign_id, stored["id"]])

    @task(3)
    def react(self) -> None:
        self._next()
        if not self.seen_ids:
            self._read("timeline", "read flat")
            return
        activity = random.choice(self.seen_ids)
        like = {"kind": "like", "user": self.me}
        self._send("POST", f"/v1/activities/{activity}/reactions", "reaction", like)

    @task(2)
    def follow(self) -> None:
        self._next()
        source = f"user:{person(random.randint(1, PEOPLE))}"
        self._send("POST", f"/v1/feeds/timeline/{self.me}/follows", "follow", {"source": source})

    @task(2)
    def mark(self) -> None:
        self._next()
        which = random.choice(("seen", "read"))
        path = f"/v1/feeds/notification/{self.me}/{which}"
        self._send("POST", path, "seen/read", {"all": True})
