"""Operating commands: ``reclassify``, ``rebuild``, ``migrate`` and the Celery
``worker``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from tidings.canonical import migrations
from tidings.canonical.db import Database
from tidings.canonical.partitioning import OnlinePartitioning
from tidings.cli.app import _engine, _reported_errors, _safe_url, _state, app
from tidings.cli.render import ProgressBars, err, out
from tidings.core.errors import ValidationError
from tidings.core.extras import needs
from tidings.core.limits import DEFAULT_PARTITIONS, MAX_PARTITIONS
from tidings.engine import Tidings
from tidings.task_runners import WORKER_QUEUES


@app.command("reclassify")
def reclassify_command(
    ctx: typer.Context,
    threshold: Annotated[
        int | None,
        typer.Option(min=0, help="Followers above which a source is pulled (default: settings)."),
    ] = None,
) -> None:
    """Move sources between push and pull fan-out by follower count, and followers
    between delivery tiers by when they last read.

    Run it periodically (cron, or a scheduled task): a source goes to pull above
    the threshold and back to push below threshold * (1 - pull_hysteresis); a
    follower feed not read for inactive_days goes idle (skipped by deliveries,
    rebuilt when read again).
    """
    with _engine(ctx, "manual") as engine:
        idled = engine.admin.sweep_readers()
        changes = engine.admin.reclassify(threshold)
    for source, before, after in changes:
        out.print(Text(f"{source}: {before} -> {after}"))
    out.print(Text(f"{len(changes)} source(s) reclassified"))
    days = engine.settings.inactive_days
    if days > 0:
        out.print(Text(f"{len(idled)} follower feed(s) newly idle (not read for {days:g} days)"))


@app.command("rebuild")
def rebuild_command(
    ctx: typer.Context,
    feeds: Annotated[
        list[str] | None, typer.Argument(metavar="[FEED]...", help="Feeds to rebuild.")
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every feed the canonical store knows of.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Every feed written to in this long before now (30s, 15m, 1h, 7d): "
            "after a Redis failover, longer than the replica's lag plus the delivery lag.",
        ),
    ] = None,
) -> None:
    """Rebuild feeds in the timeline store from the canonical store (after a Redis
    flush or loss, or to repair): flat feeds get the newest max_length entries of
    their history; aggregated feeds are aggregated again, with their recorded seen/read marks."""
    if (bool(feeds) + every + (since is not None)) != 1:
        err.print("error: name feeds to rebuild, or pass --all, or --since DURATION")
        raise typer.Exit(2)
    with _reported_errors():
        window = None if since is None else _window_seconds(since)
    with _engine(ctx, "manual") as engine, ProgressBars(err) as report:
        if window is not None:
            chosen = engine.admin.feeds_written_since(engine.clock.ms() - window * 1000)
        else:
            chosen = engine.admin.known_feeds() if every else list(feeds or [])
        report("rebuilt", 0, len(chosen))
        done = 0
        for _ in engine.admin.rebuild(chosen):
            done += 1
            report("rebuilt", done, len(chosen))
    out.print(Text(f"{done} feed(s) rebuilt"))


def _window_seconds(text: str) -> int:
    # (Imported here: importing the serve module first would list its
    # commands before these in ``tidings --help``.)
    from tidings.cli.serve import parse_ttl

    seconds = parse_ttl(text)
    if seconds is None:
        raise ValidationError(f"{text!r} is not a duration like 30s, 15m, 1h or 7d", field="since")
    return seconds


@app.command("migrate")
def migrate_command(
    ctx: typer.Context,
    partition: Annotated[
        bool,
        typer.Option(
            "--partition",
            help="PostgreSQL: then partition activities and follows by hash of their source "
            "feed, online (publishes go on; run it again to resume after an interruption).",
        ),
    ] = False,
    partitions: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_PARTITIONS,
            help="Partitions per table (default: the postgres_partitions setting, or "
            f"{DEFAULT_PARTITIONS} when it is 0).",
        ),
    ] = None,
    batch_rows: Annotated[
        int,
        typer.Option(min=1, max=1_000_000, help="With --partition: rows copied per transaction."),
    ] = 5000,
    keep_old: Annotated[
        bool,
        typer.Option(
            "--keep-old",
            help="With --partition: keep the plain tables, renamed <table>_unpartitioned.",
        ),
    ] = False,
) -> None:
    """Bring the database schema up to date and print its version."""
    with _reported_errors():
        settings = _state(ctx).settings()
        url = settings.database_url
        # Migrations concern the SQL database alone; opening a whole engine
        # would also connect to Redis when it is configured.
        db = Database(url, postgres_partitions=settings.postgres_partitions)
        try:
            applied = db.migrate()
            with db.read() as conn:
                version = migrations.current_version(conn)
            steps = f"applied {applied} step(s)" if applied else "already up to date"
            out.print(Text(f"schema version {version} ({steps}) on {_safe_url(url)}"))
            if partition:
                count = partitions or settings.postgres_partitions or DEFAULT_PARTITIONS
                _partition(db, count, batch_rows, keep_old)
        finally:
            db.close()


def _partition(db: Database, partitions: int, batch_rows: int, keep_old: bool) -> None:
    with ProgressBars(err) as bars:
        report = OnlinePartitioning(
            db, partitions=partitions, batch_rows=batch_rows, keep_old=keep_old, progress=bars
        ).run()
    for table in report.tables:
        if table.already:
            out.print(Text(f"{table.table}: already partitioned"))
        else:
            out.print(
                Text(
                    f"{table.table}: {table.rows} row(s) copied into {report.partitions} "
                    f"partitions in {table.seconds:.1f} s"
                )
            )
    out.print(
        Text(
            f"longest lock held {report.longest_lock_s * 1000:.0f} ms, longest batch "
            f"{report.longest_batch_s * 1000:.0f} ms"
        )
    )


@app.command("worker")
def worker_command(
    ctx: typer.Context,
    concurrency: Annotated[
        int, typer.Option(min=1, max=256, help="Worker processes carrying out deliveries.")
    ] = 2,
    queues: Annotated[
        str,
        typer.Option(
            metavar="NAMES",
            help="Comma-separated queues to consume, most urgent first "
            "(tidings.high: followers who read recently; tidings.low: the others).",
        ),
    ] = ",".join(WORKER_QUEUES),
) -> None:
    """Run a Celery worker that carries out deliveries until Ctrl-C.

    The broker is TIDINGS_BROKER_URL (else TIDINGS_REDIS_URL); publishers use
    it with TIDINGS_TASK_RUNNER=celery. The worker also dispatches pending
    deliveries, so rows left by a publishing process that died are delivered.
    """
    # Migrate once, here, before the pool's processes start, and fail clearly
    # when a store does not answer.
    with _engine(ctx, "manual") as engine:
        engine.admin.health()
        settings = engine.settings
    with _reported_errors():
        with needs("celery", "tidings worker"):
            from tidings.task_runners.celery import run_worker
        names = [q.strip() for q in queues.split(",") if q.strip()]
        run_worker(
            settings,
            lambda: Tidings(settings, task_runner="manual"),
            concurrency=concurrency,
            queues=names,
        )
