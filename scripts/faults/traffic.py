"""A steady load of HTTP writes and reads on the cluster, and its ledger of
what was acknowledged.

The graph is the run's own (every feed key starts with the run's id, so runs
on one cluster never meet): ``sources`` publishers ``user:<run>-s<i>``, and
``followers`` timelines ``timeline:<run>-f<j>`` that follow three of them
each before the load starts. During the load, threads:

- publish to a random source, a new ``foreign_id`` each time, at a steady
  rate shared by the writer threads;
- follow: a new timeline ``timeline:<run>-d<n>`` follows a random source
  with a ``copy_limit`` above anything a source gets, so it ends holding
  every activity of it, copied or delivered;
- read pages of random feeds of the run.

Each request goes to a serve process in turn; one that does not answer
(refused: killed, restarting) is sent to the next. A write counts as
acknowledged when it was answered 2xx, and only then.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tidings.core.limits import MAX_COPY_LIMIT, MAX_FOLLOW_BATCH
from tidings.http.auth import mint

#: Sources each static follower follows.
FOLLOWS_EACH = 3
#: Publishes a source gets in a run, on average: a static follower's feed
#: (three sources) stays well below ``max_length`` (800: no feed is
#: trimmed), and a dynamic follow's ``copy_limit`` covers its source.
PER_SOURCE = 100


@dataclass(frozen=True)
class Plan:
    """The run's graph and pace."""

    run: str
    sources: int
    followers: int
    publishes_per_second: float
    seconds: float

    def source(self, i: int) -> str:
        return f"user:{self.run}-s{i}"

    def follower(self, j: int) -> str:
        return f"timeline:{self.run}-f{j}"

    def followed_by(self, j: int) -> list[str]:
        """The sources static follower ``j`` follows."""
        return [self.source((j + k) % self.sources) for k in range(FOLLOWS_EACH)]

    @classmethod
    def sized(cls, run: str, seconds: float, publishes_per_second: float) -> Plan:
        """Enough sources that each gets about :data:`PER_SOURCE` publishes."""
        sources = max(8, int(seconds * publishes_per_second / PER_SOURCE) + 1)
        return cls(run, sources, 2 * sources, publishes_per_second, seconds)


@dataclass
class Ledger:
    """What the traffic sent and what it was answered; shared by its threads."""

    #: ``"publish 201"`` -> responses; status 0: no answer.
    statuses: Counter[str] = field(default_factory=Counter)
    #: Acknowledged publishes: foreign id -> (source feed, activity id).
    acknowledged: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Publishes sent (each foreign id once).
    sent: int = 0
    #: Acknowledged follows made during the load: follower -> source.
    follows: dict[str, str] = field(default_factory=dict)
    #: Follows not acknowledged (their feeds are not checked: unknown state).
    unsure_follows: int = 0
    #: When each acknowledged publish was answered (monotonic), by foreign id.
    answered_at: dict[str, float] = field(default_factory=dict)
    #: Responses with ``Retry-After`` among the 503s.
    retry_after: int = 0
    #: When the last request failed (5xx or no answer), monotonic; 0: none did.
    last_failure_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str, status: int, *, failed: bool | None = None) -> None:
        """A response (status 0: none); ``failed`` says whether a client saw a
        failure (by default, a 5xx or no answer)."""
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1
            if failed if failed is not None else (status == 0 or status >= 500):
                self.last_failure_at = time.monotonic()


class Traffic:
    """The load's threads over ``urls``; :meth:`start`, then :meth:`stop`."""

    def __init__(self, urls: list[str], secret: str, plan: Plan, ledger: Ledger) -> None:
        self.urls = urls
        self.plan = plan
        self.ledger = ledger
        self.headers = {"Authorization": f"Bearer {mint(secret, '*', server=True)}"}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next_id = 0
        self._ids = threading.Lock()
        self._writers = 1

    # -- before the load ----------------------------------------------------------------

    def set_up(self) -> None:
        """Every static follower follows its sources, in one batch (retried until
        acknowledged: the graph must be known before any fault)."""
        pairs = [
            {"follower": self.plan.follower(j), "source": source}
            for j in range(self.plan.followers)
            for source in self.plan.followed_by(j)
        ]
        with httpx.Client(timeout=30, headers=self.headers) as client:
            for start in range(0, len(pairs), MAX_FOLLOW_BATCH):
                batch: dict[str, object] = {"follows": pairs[start : start + MAX_FOLLOW_BATCH]}
                for _ in range(50):
                    answer = self._send(client, "POST", "/v1/follows:batch", batch)
                    if answer is not None and answer.status_code == 200:
                        break
                    time.sleep(0.2)
                else:
                    raise RuntimeError("could not make the static followers follow before the load")

    # -- the load -------------------------------------------------------------------------

    def start(self, writers: int = 2, readers: int = 2) -> None:
        self._writers = writers
        jobs = [self._publishing] * writers + [self._reading] * readers + [self._following]
        for n, job in enumerate(jobs):
            thread = threading.Thread(target=job, args=(n,), name=f"faults-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()

    def _publishing(self, n: int) -> None:
        rng = random.Random(n)
        pause = self._writers / self.plan.publishes_per_second
        with httpx.Client(timeout=15, headers=self.headers) as client:
            while not self._stop.is_set():
                began = time.monotonic()
                self._publish(client, self.plan.source(rng.randrange(self.plan.sources)))
                self._stop.wait(max(0.0, pause - (time.monotonic() - began)))

    def _publish(self, client: httpx.Client, source: str) -> None:
        with self._ids:
            self._next_id += 1
            foreign_id = f"{self.plan.run}-a{self._next_id}"
        group, key = source.split(":", 1)
        body: dict[str, object] = {"actor": key, "verb": "post", "object": f"note:{foreign_id}"}
        body |= {"foreign_id": foreign_id, "extra": {"sent_at": time.time()}}
        with self.ledger.lock:
            self.ledger.sent += 1
        answer = self._send(client, "POST", f"/v1/feeds/{group}/{key}/activities", body)
        if answer is None:
            return
        if answer.status_code in (200, 201):
            with self.ledger.lock:
                self.ledger.acknowledged[foreign_id] = (source, answer.json()["id"])
                self.ledger.answered_at[foreign_id] = time.monotonic()

    def _following(self, n: int) -> None:
        rng = random.Random(n)
        made = 0
        with httpx.Client(timeout=15, headers=self.headers) as client:
            while not self._stop.wait(0.5):
                made += 1
                follower = f"timeline:{self.plan.run}-d{made}"
                source = self.plan.source(rng.randrange(self.plan.sources))
                group, key = follower.split(":", 1)
                body: dict[str, object] = {"source": source, "copy_limit": MAX_COPY_LIMIT}
                answer = self._send(client, "POST", f"/v1/feeds/{group}/{key}/follows", body)
                with self.ledger.lock:
                    if answer is not None and answer.status_code in (200, 201):
                        self.ledger.follows[follower] = source
                    else:
                        self.ledger.unsure_follows += 1

    def _reading(self, n: int) -> None:
        rng = random.Random(1000 + n)
        with httpx.Client(timeout=15, headers=self.headers) as client:
            while not self._stop.is_set():
                if rng.random() < 0.5:
                    feed = self.plan.follower(rng.randrange(self.plan.followers))
                else:
                    feed = self.plan.source(rng.randrange(self.plan.sources))
                group, key = feed.split(":", 1)
                self._send(client, "GET", f"/v1/feeds/{group}/{key}?limit=25", None)
                self._stop.wait(0.02)

    def _send(
        self, client: httpx.Client, method: str, path: str, body: dict[str, object] | None
    ) -> httpx.Response | None:
        """``method path`` on the first serve process that answers, starting at
        a random one; the answer (counted), or None when none answered."""
        kind = _kind(method, path)
        start = random.randrange(len(self.urls))
        for i in range(len(self.urls)):
            url = self.urls[(start + i) % len(self.urls)]
            try:
                answer = client.request(method, url + path, json=body)
            except httpx.ConnectError:
                # Refused: never reached it. Sent to the next, as a proxy would;
                # a failure only if none answers.
                self.ledger.count(kind, 0, failed=i == len(self.urls) - 1)
                continue
            except httpx.TransportError:
                self.ledger.count(kind, 0)  # cut off mid-request: not acknowledged
                return None
            self.ledger.count(kind, answer.status_code)
            if answer.status_code == 503 and "retry-after" in answer.headers:
                with self.ledger.lock:
                    self.ledger.retry_after += 1
            return answer
        return None


def _kind(method: str, path: str) -> str:
    if method == "GET":
        return "read"
    return "follow" if "/follows" in path else "publish"
