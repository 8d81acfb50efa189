"""The five fault scenarios: a fault injected into the cluster under a steady
load, repaired, and the check of every acknowledged write.

Each scenario runs the load (:mod:`scripts.faults.traffic`) for ``seconds``:
the fault comes at a quarter of it, the repair (what an operator or a
supervisor would do: start the killed process again, start PostgreSQL again,
lift the memory limit) at three quarters or as soon as the fault has run
its course, whichever is later; the load goes on after the repair. Then the
deliveries drain and :mod:`scripts.faults.audit` checks. Every scenario
leaves the cluster as it found it, every part running and answering.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import psycopg

from scripts.cluster import State
from scripts.faults import audit, parts
from scripts.faults.live import Subscriber
from scripts.faults.report import RedisLoss, Report, SseGap
from scripts.faults.traffic import Ledger, Plan, Traffic

#: Subscribers the serve-kill scenario holds open on the serve it kills.
SUBSCRIBERS = 8
#: How long the deliveries may take to drain after the load, besides the
#: lease a batch a killed worker held waits out first.
DRAIN_TIMEOUT = 90.0


@dataclass
class Run:
    """One scenario's run: the cluster, the load, and what the fault noted."""

    state: State
    plan: Plan
    ledger: Ledger
    traffic: Traffic
    notes: dict[str, object] = field(default_factory=dict)
    started: float = 0.0
    fault_at: float = 0.0
    repaired_at: float = 0.0
    redis_loss: RedisLoss | None = None
    _repairs: list[threading.Thread] = field(default_factory=list)
    _failed: list[BaseException] = field(default_factory=list)

    def meanwhile(self, repair: Callable[[], None]) -> None:
        """Run ``repair`` (a process started again: seconds of imports) on a
        thread, while the load, the drain and the check go on; :meth:`join`
        waits for it."""

        def run() -> None:
            try:
                repair()
            except BaseException as exc:
                self._failed.append(exc)

        thread = threading.Thread(target=run, name="faults-repair", daemon=True)
        thread.start()
        self._repairs.append(thread)

    def join(self) -> None:
        """Wait for the repairs :meth:`meanwhile` started; raise the first failure."""
        for thread in self._repairs:
            thread.join(timeout=parts.REPAIR_TIMEOUT + 30)
        if self._failed:
            raise self._failed[0]

    def pending(self) -> int:
        with psycopg.connect(audit.conninfo(self.state), autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM tidings_outbox").fetchone()
        return 0 if row is None else int(row[0])


@dataclass(frozen=True)
class Scenario:
    name: str
    #: What it does, for ``--help`` and the report.
    about: str
    inject: Callable[[Run], None]
    repair: Callable[[Run], None]
    #: Feeds lost with a Redis node are rebuilt from the canonical store before the check.
    rebuilds: bool = False
    subscribers: bool = False


# -- celery-kill ----------------------------------------------------------------------


def _kill_worker(run: Run) -> None:
    run.notes["argv"] = parts.command_line(run.state, "worker-1")
    run.notes["deliveries pending at the kill"] = run.pending()
    # Mid-batch: as soon as its log shows a task received and not ended (a
    # batch takes milliseconds, so one may still end before the signal lands).
    log = run.state.directory / "worker-1" / "worker-1.log"
    parts.when_busy(log, timeout=5)
    parts.kill(run.state, "worker-1")
    run.notes["batches cut off by the kill"] = len(parts.in_flight(log))


def _restart_worker(run: Run) -> None:
    argv = run.notes.pop("argv")
    assert isinstance(argv, list)

    def restart() -> None:
        took = parts.restart_command(run.state, "worker-1", argv)
        run.notes["worker restarted in s"] = round(took, 1)

    run.meanwhile(restart)


# -- redis-failover -------------------------------------------------------------------


#: Replication stream (bytes) the master must have written after its link to
#: its replica was cut, and the least time, before it is killed: deliveries
#: a dozen or more, spread over the feeds of its slots.
LOST_BYTES = 2048
LOSS_SECONDS = 1.0


def _kill_redis_master(run: Run) -> None:
    master = parts.a_master(run.state)
    replica = parts.replica_of(run.state, master)
    run.notes["killed"] = master.name
    # Real loss, every time. Redis replicates asynchronously, but on one
    # machine a replica trails its master by microseconds: a kill alone loses
    # nothing, and the rebuild would go untested. So the replica is stopped
    # (SIGSTOP: it reads nothing and cannot reconnect), the master's link to
    # it closed (what the socket held by then still reaches the replica when
    # it runs again: the kernel delivers a closed socket's data; nothing
    # written later does), writes land on the master alone for a moment, the
    # master is killed, and the replica, resumed, finds it gone and takes
    # over without those writes: deliveries acknowledged (their outbox rows
    # done) whose entries PostgreSQL holds and Redis no longer does. Well
    # under the node timeout (5 s), the others never mark the replica failed.
    parts.pause(run.state, replica.name)
    try:
        cut, since = parts.cut_replicas(master.port), time.monotonic()
        parts.wait_until(
            "writes on the Redis master alone",
            lambda: (
                parts.repl_offset(master.port) >= cut + LOST_BYTES
                and time.monotonic() - since >= LOSS_SECONDS
            ),
            timeout=30,
        )
        run.notes["replication bytes the replica never got"] = parts.repl_offset(master.port) - cut
        parts.kill(run.state, master.name)
    finally:
        parts.unpause(run.state, replica.name)
    took = parts.wait_until(
        f"{replica.name} to take over from {master.name}",
        lambda: parts.role(replica.port) == "master" and parts.cluster_ok(run.state, skip=master),
    )
    run.notes["failover in s"] = round(took, 1)


def _restart_redis_node(run: Run) -> None:
    name = run.notes["killed"]
    assert isinstance(name, str)
    run.notes["rejoined as a replica in s"] = round(parts.restart_redis_node(run.state, name), 1)


# -- postgres-restart -----------------------------------------------------------------


def _halt_postgres(run: Run) -> None:
    parts.halt_postgres(run.state)


def _resume_postgres(run: Run) -> None:
    run.notes["PostgreSQL down for s"] = round(time.monotonic() - run.fault_at, 1)
    run.notes["PostgreSQL started in s"] = round(parts.resume_postgres(run.state), 1)


# -- serve-kill -----------------------------------------------------------------------


def _kill_serve(run: Run) -> None:
    run.notes["argv"] = parts.command_line(run.state, "serve-1")
    parts.kill(run.state, "serve-1")


def _restart_serve(run: Run) -> None:
    argv = run.notes.pop("argv")
    assert isinstance(argv, list)

    def restart() -> None:
        took = parts.restart_command(run.state, "serve-1", argv)
        run.notes["serve restarted in s"] = round(took, 1)

    run.meanwhile(restart)


# -- redis-maxmemory ------------------------------------------------------------------

#: Bytes above what a master uses when the limit is set: the load's writes
#: reach it within a second or so.
MAXMEMORY_HEADROOM = 32 * 1024


def _limit_memory(run: Run) -> None:
    # noeviction: a timeline is data tidings cannot tell was evicted (a reader
    # would see a short feed, and no rebuild would be queued), and an evicted
    # event stream or watched set would be a gap no resync announces. At the
    # limit, writes fail loudly instead, and the outbox retries them.
    limits = {}
    for master in parts.masters(run.state):
        limits[master.port] = (
            parts.config_get(master.port, "maxmemory"),
            parts.config_get(master.port, "maxmemory-policy"),
        )
        parts.config_set(master.port, "maxmemory-policy", "noeviction")
        parts.config_set(
            master.port, "maxmemory", parts.used_memory(master.port) + MAXMEMORY_HEADROOM
        )
    run.notes["limits"] = limits
    ports = list(limits)
    before = sum(parts.oom_errors(port) for port in ports)
    took = parts.wait_until(
        "a write refused for the memory limit",
        lambda: sum(parts.oom_errors(port) for port in ports) > before,
    )
    run.notes["first write refused (OOM) after s"] = round(took, 1)


def _lift_memory_limit(run: Run) -> None:
    limits = run.notes.pop("limits")
    assert isinstance(limits, dict)
    run.notes["writes refused (OOM) by the masters"] = sum(
        parts.oom_errors(port) for port in limits
    )
    for port, (maxmemory, policy) in limits.items():
        parts.config_set(port, "maxmemory", maxmemory)
        parts.config_set(port, "maxmemory-policy", policy)


SCENARIOS = {
    s.name: s
    for s in [
        Scenario(
            "celery-kill",
            "SIGKILL a Celery worker (its whole process group) while deliveries are "
            "queued; the other worker finishes them, and the killed one is started again",
            _kill_worker,
            _restart_worker,
        ),
        Scenario(
            "redis-failover",
            "SIGKILL a Redis Cluster master whose replica missed its last writes; the "
            "replica takes over; the node is started again (a replica now); the feeds "
            "written lately are rebuilt from PostgreSQL (tidings rebuild --since)",
            _kill_redis_master,
            _restart_redis_node,
            rebuilds=True,
        ),
        Scenario(
            "postgres-restart",
            "stop the PostgreSQL primary (fast shutdown) for a while and start it again; "
            "503 with Retry-After meanwhile, and the serve processes recover by themselves",
            _halt_postgres,
            _resume_postgres,
        ),
        Scenario(
            "serve-kill",
            "SIGKILL one tidings serve (its process group) holding SSE streams; they "
            "resume on the other with Last-Event-ID; the killed one is started again",
            _kill_serve,
            _restart_serve,
            subscribers=True,
        ),
        Scenario(
            "redis-maxmemory",
            "set maxmemory (noeviction) just above what each Redis master uses, so writes "
            "hit the limit; publishes go on through PostgreSQL and the outbox; limit lifted",
            _limit_memory,
            _lift_memory_limit,
        ),
    ]
}


def run_scenario(
    scenario: Scenario, state: State, seconds: float, rate: float, log: Callable[[str], None]
) -> Report:
    """Run ``scenario`` on the cluster of ``state`` under ``rate`` publishes a
    second for ``seconds``, and check; the report."""
    plan = Plan.sized(f"{scenario.name}-{secrets.token_hex(3)}", seconds, rate)
    ledger = Ledger()
    traffic = Traffic(state.serve_urls, state.secret, plan, ledger)
    run = Run(state, plan, ledger, traffic)
    traffic.set_up()
    subscribers = _subscribe(state, plan) if scenario.subscribers else []
    started = run.started = time.monotonic()
    traffic.start()
    try:
        _sleep_until(started + seconds / 4)
        run.fault_at = time.monotonic()
        log(f"  {scenario.name}: fault at {run.fault_at - started:.1f} s")
        scenario.inject(run)
        _sleep_until(started + 3 * seconds / 4)
        scenario.repair(run)
        run.repaired_at = time.monotonic()
        log(f"  {scenario.name}: repaired at {run.repaired_at - started:.1f} s")
        _sleep_until(max(started + seconds, run.repaired_at + 2))
    finally:
        traffic.stop()
    load_seconds = time.monotonic() - started
    run.notes["drained in s"] = round(
        audit.drain(state, state.redispatch_seconds + DRAIN_TIMEOUT), 1
    )
    feeds = audit.expected_feeds(plan, ledger)
    if scenario.rebuilds:
        _rebuild_lost(run, feeds)
    checked = audit.check(state, plan, ledger, feeds)
    gaps = _gaps(subscribers, feeds) if subscribers else None
    if scenario.name == "redis-maxmemory":
        run.notes |= oom_signs(state)
    run.join()  # (the cluster whole again before the next scenario)
    return Report.of(scenario.name, load_seconds, run, checked, gaps)


def _rebuild_lost(run: Run, feeds: dict[str, set[str]]) -> None:
    """What the failover lost in Redis (once the deliveries drained), the
    operator's step after one (``tidings rebuild --since`` a window covering
    it; the runbook's), and what Redis lacks after it."""
    lacking, missing = audit.missing_in_redis(run.state, feeds)
    window = math.ceil(time.monotonic() - run.started) + 10
    command = ["rebuild", "--since", f"{window}s"]
    rebuilt = audit.rebuild_command(run.state, command)
    _, left = audit.missing_in_redis(run.state, feeds)
    run.redis_loss = RedisLoss(len(lacking), missing, f"tidings {' '.join(command)}", rebuilt, left)


def _subscribe(state: State, plan: Plan) -> list[Subscriber]:
    """SSE streams of the first static followers, all on the first serve."""
    feeds = [plan.follower(j) for j in range(min(SUBSCRIBERS, plan.followers))]
    subscribers = [Subscriber(feed, state.serve_urls, state.secret) for feed in feeds]
    for subscriber in subscribers:
        subscriber.start()
    for subscriber in subscribers:
        if not subscriber.wait_open(30):
            raise RuntimeError(f"the SSE stream of {subscriber.seen.feed} did not open")
    time.sleep(0.5)  # a subscription gets the events of writes made after it starts
    return subscribers


def _gaps(subscribers: list[Subscriber], feeds: dict[str, set[str]]) -> SseGap:
    """Wait (a while) for the streams to show every acknowledged activity, stop them,
    and count what each is still missing."""
    deadline = time.monotonic() + 30

    def missing(s: Subscriber) -> int:
        return len(feeds[s.seen.feed] - set(s.seen.added))

    while any(missing(s) for s in subscribers) and time.monotonic() < deadline:
        time.sleep(0.2)
    for subscriber in subscribers:
        subscriber.stop()
    seen = [s.seen for s in subscribers]
    return SseGap(
        streams=len(seen),
        expected=sum(len(feeds[s.feed]) for s in seen),
        missing=sum(missing(s) for s in subscribers),
        repeated=sum(s.repeated for s in seen),
        resyncs=sum(s.resyncs for s in seen),
        resumed=sum(s.resumed for s in seen),
        resumed_elsewhere=sum(len(set(s.opened_on)) > 1 for s in seen),
    )


def oom_signs(state: State) -> dict[str, object]:
    """The Redis OOM as the cluster reports it: the serve processes'
    ``tidings_store_errors_total{store="redis",kind="OutOfMemoryError"}``, and
    the log lines of the serve and worker processes that name it."""
    metric = 0.0
    labels = ('store="redis"', 'kind="OutOfMemoryError"')
    for url in state.serve_urls:
        with contextlib.suppress(httpx.HTTPError):
            for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
                if line.startswith("tidings_store_errors_total{") and all(
                    label in line for label in labels
                ):
                    metric += float(line.split()[-1])  # (each serve: its own workers)
    lines = [
        line
        for path in sorted(state.directory.glob("*/*.log"))
        if path.parent.name.startswith(("serve-", "worker-"))
        for line in path.read_text(errors="replace").splitlines()
        if "OOM command not allowed" in line or "OutOfMemoryError" in line
    ]
    lines.sort(key=lambda line: "store unavailable" not in line)  # the API's own line first
    return {
        "store errors metric (redis, OutOfMemoryError)": metric,
        "log lines naming the OOM": len(lines),
        "first log line": lines[0][:300] if lines else "",
    }


def _sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.monotonic()))
