"""The ``tidings`` command line: publish, read and follow from a shell, a demo,
and the HTTP service (``serve``) with the tokens it accepts (``token``).

Settings are read once per invocation: ``TIDINGS_*`` variables and
``tidings.toml`` as everywhere, with the global ``--database-url`` and
``--redis-url`` options winning over both.

Errors tidings raises on purpose (:class:`tidings.TidingsError`) are the
caller's input, not a bug: they print one red line on stderr and exit with
status 2, the status of a usage error, never with a traceback.

``serve`` hands its settings to uvicorn's worker processes through
``TIDINGS_*`` environment variables, the only way they can receive them.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, NoReturn

import orjson
import typer
from pydantic import ValidationError as SettingsError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from tidings import demo as demo_data
from tidings import migrations
from tidings.activity import Activity
from tidings.aggregation import ActivityGroup, GroupPage
from tidings.db import Database
from tidings.engine import DeliveryMode, Tidings
from tidings.errors import InvalidFeedId, TidingsError, ValidationError
from tidings.feeds import parse_feed_id
from tidings.page import Page
from tidings.settings import Settings
from tidings.tasks import WORKER_QUEUES

EXIT_BAD_INPUT = 2
#: The database could not be reached or failed: not the caller's input.
EXIT_FAILURE = 1

#: Engine field names as the options that carry them, so a message names
#: what the user typed.
_OPTION_NAMES = {
    "actor": "--actor",
    "verb": "--verb",
    "object": "--object",
    "target": "--target",
    "foreign_id": "--foreign-id",
    "to": "--to",
    "extra": "--extra",
    "time": "--time",
    "cursor": "--cursor",
    "limit": "--limit",
    "copy_limit": "--copy-limit",
    "users": "--users",
    "activities": "--activities",
    "fans": "--fans",
    "ttl": "--ttl",
    "user": "USER",
}
_DEMO_ROWS = 8
_DATE_AFTER_SECONDS = 60 * 86_400
_DETAIL_KEYS = ("text", "title", "caption")
LOCALHOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: How long a user token lives unless ``--ttl`` says otherwise.
DEFAULT_USER_TTL = "1h"
#: The demo's user token: long enough for an afternoon with the API.
_DEMO_TOKEN_TTL = "24h"
# [0-9], not \d: \d matches every script's digits, and int() reads them.
_TTL_RE = re.compile(r"([0-9]{1,9})([smhd])")
_TTL_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
_NO_EXPIRY = ("none", "never")
_SERVER_APP = "tidings.http.server:app"

app = typer.Typer(
    help="Activity feeds: publish, follow and read from the command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold URLs with passwords
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@dataclass
class _State:
    """What the global options set; settings are loaded on first use, once."""

    overrides: dict[str, str]
    _settings: Settings | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.load(**self.overrides)
        return self._settings

    def override(self, **values: str) -> None:
        """Settings given by a command's options: they win like the global ones."""
        self.overrides.update(values)
        self._settings = None

    def use_secret(self, secret: str) -> None:
        """Sign with ``secret`` from now on (a generated one: it wins like an option)."""
        self.override(secret=secret)


@app.callback()
def _root(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            metavar="URL",
            help="Canonical store, e.g. sqlite:///tidings.db or postgresql+psycopg://... "
            "Default: TIDINGS_DATABASE_URL, else tidings.toml, else sqlite:///tidings.db.",
        ),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url",
            metavar="URL",
            help=(
                "Keep feeds in Redis, e.g. redis://localhost:6379/0, or a Redis Cluster:"
                " redis+cluster://host:6379. Default: TIDINGS_REDIS_URL."
            ),
        ),
    ] = None,
) -> None:
    given = {"database_url": database_url, "redis_url": redis_url}
    # Loading waits for a command: `tidings read --help` must work even when
    # the environment holds a bad setting.
    ctx.obj = _State({k: v for k, v in given.items() if v is not None})


def main() -> None:
    app()


# -- errors -------------------------------------------------------------------


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err.print(Text("error: ", style="bold red") + Text(message, style="red"))
    raise typer.Exit(code)


def _describe(exc: TidingsError) -> str:
    if isinstance(exc, ValidationError) and exc.field:
        return f"{_OPTION_NAMES.get(exc.field, exc.field)}: {exc.detail}"
    return str(exc)


def _settings_problem(exc: SettingsError) -> str:
    problems = [f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()]
    return "; ".join(problems[:3])


@contextmanager
def _reported_errors() -> Iterator[None]:
    """Turn expected failures into one clear line and an exit status."""
    try:
        yield
    except TidingsError as exc:
        _fail(_describe(exc))
    except SettingsError as exc:
        _fail(f"invalid settings: {_settings_problem(exc)}")
    except tomllib.TOMLDecodeError as exc:
        _fail(f"invalid settings file: {exc}")
    except ArgumentError as exc:
        _fail(f"invalid database URL: {exc}")
    except Exception as exc:
        if not _unavailable(exc):
            raise  # a bug: the traceback is what is needed
        _fail(
            f"store unavailable: {exc.orig if isinstance(exc, DBAPIError) else exc}", EXIT_FAILURE
        )


def _unavailable(exc: Exception) -> bool:
    """Whether ``exc`` says a database or Redis server could not be used."""
    if isinstance(exc, OperationalError):
        return True
    # Only an engine on the Redis store imports redis, and only then can it fail.
    redis_errors = sys.modules.get("redis.exceptions")
    return redis_errors is not None and isinstance(exc, redis_errors.RedisError)


def _state(ctx: typer.Context) -> _State:
    state = ctx.find_object(_State)
    if state is None:  # a command invoked without the app's callback (embedding)
        state = _State({})
    return state


@contextmanager
def _engine(ctx: typer.Context, delivery: DeliveryMode) -> Iterator[Tidings]:
    """An engine on the invocation's settings, closed on the way out; errors reported."""
    with _reported_errors(), Tidings(_state(ctx).settings(), delivery=delivery) as engine:
        yield engine


# -- output -------------------------------------------------------------------


def _print_json(value: Any) -> None:
    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z).decode())


def ago(when: datetime, now: datetime) -> str:
    """``when`` relative to ``now``, as people say it: "3m ago", "2d ago", "in 5h"."""
    seconds = int((now - when).total_seconds())
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 45:
        return "just now"
    if seconds >= _DATE_AFTER_SECONDS:  # "934d ago" says less than a date
        return when.date().isoformat()
    units = (("d", 86_400), ("h", 3_600), ("m", 60))
    amount = next((f"{seconds // n}{u}" for u, n in units if seconds >= n), f"{seconds}s")
    return f"in {amount}" if future else f"{amount} ago"


def _detail(activity: Activity) -> str:
    for key in _DETAIL_KEYS:
        value = activity.extra.get(key)
        if isinstance(value, str):
            return value
    return orjson.dumps(activity.extra).decode() if activity.extra else ""


def activity_table(activities: Sequence[Activity], *, now: datetime) -> Table:
    """Activities as rows: age, actor, verb, object, target and detail.

    No ids: they would crowd out the rest on a narrow terminal, and scripts
    that need them read ``--json``.
    """
    table = Table()
    table.add_column("when", style="dim", no_wrap=True)
    table.add_column("actor", style="cyan", no_wrap=True)
    table.add_column("verb", style="green", no_wrap=True)
    table.add_column("object", no_wrap=True)
    table.add_column("target", no_wrap=True)
    table.add_column("detail", overflow="ellipsis", no_wrap=True, max_width=32)
    for a in activities:
        # Text, not str: user data must not be read as rich markup.
        cells = [ago(a.time, now), a.actor, a.verb, a.object, a.target or "", _detail(a)]
        table.add_row(*(Text(c) for c in cells))
    if not activities:
        table.caption = "no activities"
    return table


# -- commands -----------------------------------------------------------------

FeedArg = Annotated[str, typer.Argument(metavar="FEED", help="A feed id, e.g. user:bob.")]


@app.command("read")
def read_command(
    ctx: typer.Context,
    feed: FeedArg,
    limit: Annotated[int, typer.Option(help="Activities per page (1-100).")] = 25,
    cursor: Annotated[
        str | None, typer.Option(help="The `next` cursor of the previous page.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"results": [...], "next": ...}.')
    ] = False,
) -> None:
    """Print a page of FEED, newest first (groups, for aggregated and notification feeds)."""
    with _engine(ctx, "manual") as engine:
        if engine.grouped(feed):
            groups = engine.read_groups(feed, limit=limit, cursor=cursor)
            if as_json:
                _print_json(_group_page_json(groups))
            else:
                _print_groups(feed, groups)
            return
        page = engine.read(feed, limit=limit, cursor=cursor)
    if as_json:
        _print_json({"results": [a.to_dict() for a in page.results], "next": page.next})
    else:
        _print_page(feed, page)


def _group_page_json(page: GroupPage) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [g.to_dict() for g in page.results], "next": page.next}
    if page.unseen is not None:
        body["unseen"], body["unread"] = page.unseen, page.unread
    return body


def headline(group: ActivityGroup) -> str:
    """ "bob liked 3 photos", "alice and 4 others liked photo:17"."""
    names = list(dict.fromkeys(a.actor for a in group.activities))
    who = names[0] if names else "someone"
    others = group.actor_count - 1
    if others == 1 and len(names) > 1:
        who = f"{names[0]} and {names[1]}"
    elif others > 0:
        who = f"{who} and {others} others"
    objects = list(dict.fromkeys(a.object for a in group.activities))
    if len(objects) == 1:
        what = objects[0]
    else:
        # "photo:17", "photo:18" -> "2 photos"; mixed kinds -> "2 items".
        kinds = {o.partition(":")[0] for o in objects if ":" in o}
        noun = f"{kinds.pop()}s" if len(kinds) == 1 else "items"
        what = f"{group.activity_count} {noun}"
    return f"{who} {group.verb} {what}"


def group_table(groups: Sequence[ActivityGroup], *, now: datetime) -> Table:
    table = Table()
    table.add_column("when", style="dim", no_wrap=True)
    table.add_column("what", overflow="ellipsis", no_wrap=True, max_width=60)
    table.add_column("activities", justify="right")
    notification = any(g.is_seen is not None for g in groups)
    if notification:
        table.add_column("new", no_wrap=True)
    for g in groups:
        cells = [Text(ago(g.updated_at, now)), Text(headline(g)), Text(str(g.activity_count))]
        if notification:
            cells.append(Text("" if g.is_seen else "new", "bold yellow"))
        table.add_row(*cells)
    if not groups:
        table.caption = "no activities"
    return table


def _print_groups(feed: str, page: GroupPage) -> None:
    title = feed if page.unseen is None else f"{feed}  ({page.unseen} unseen, {page.unread} unread)"
    out.print(Text(title, style="bold"))
    out.print(group_table(page.results, now=datetime.now(UTC)))
    if page.next:
        out.print(Text(f"more: tidings read {feed} --cursor {page.next}", "dim"), soft_wrap=True)


def _print_page(feed: str, page: Page[Activity]) -> None:
    out.print(Text(feed, style="bold"))
    out.print(activity_table(page.results, now=datetime.now(UTC)))
    if page.next:
        # soft_wrap: a cursor broken over two lines cannot be pasted back.
        out.print(Text(f"more: tidings read {feed} --cursor {page.next}", "dim"), soft_wrap=True)


@app.command("add")
def add_command(
    ctx: typer.Context,
    feed: FeedArg,
    actor: Annotated[str, typer.Option(help="Who did it, e.g. bob.")],
    verb: Annotated[str, typer.Option(help="What they did, e.g. post, like.")],
    object_: Annotated[str, typer.Option("--object", help="To what, e.g. photo:1.")],
    target: Annotated[str | None, typer.Option(help="Where, e.g. album:7.")] = None,
    foreign_id: Annotated[
        str | None, typer.Option(help="Your id for it: adding it again to FEED is a no-op.")
    ] = None,
    to: Annotated[
        list[str] | None,
        typer.Option("--to", metavar="FEED", help="Also deliver to this feed (repeatable)."),
    ] = None,
    extra: Annotated[
        str | None, typer.Option(metavar="JSON", help='Extra fields, e.g. \'{"text": "hi"}\'.')
    ] = None,
    when: Annotated[
        str | None,
        typer.Option("--time", metavar="ISO", help="When, with an offset: 2024-05-01T12:00:00Z."),
    ] = None,
) -> None:
    """Publish an activity to FEED and print it as stored (JSON)."""
    data: dict[str, Any] = {"actor": actor, "verb": verb, "object": object_}
    optional = {"target": target, "foreign_id": foreign_id, "to": to, "time": when}
    data.update((k, v) for k, v in optional.items() if v is not None)
    with _reported_errors():  # before opening the database: bad JSON needs no database
        if extra is not None:
            data["extra"] = _parse_extra(extra)
    # Delivered before the command returns, so a `read` right after shows it.
    with _engine(ctx, "sync") as engine:
        stored, created = engine.publish(feed, data)
    if not created:
        err.print(Text(f"{feed} already has foreign_id {foreign_id}: nothing changed", "yellow"))
    _print_json(stored.to_dict())


def _parse_extra(raw: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValidationError(f"is not valid JSON ({exc})", field="extra") from None


@app.command("follow")
def follow_command(
    ctx: typer.Context,
    follower: Annotated[str, typer.Argument(metavar="FOLLOWER", help="e.g. timeline:alice")],
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="e.g. user:bob")],
    copy_limit: Annotated[
        int, typer.Option(help="Copy this many of SOURCE's newest activities now (0-1000).")
    ] = 100,
) -> None:
    """Make FOLLOWER receive what is added to SOURCE."""
    with _engine(ctx, "sync") as engine:
        created = engine.follow(follower, source, copy_limit=copy_limit)
    if created:
        out.print(Text(f"{follower} now follows {source}"))
    else:
        out.print(Text(f"{follower} already follows {source}; nothing changed"))


@app.command("unfollow")
def unfollow_command(
    ctx: typer.Context,
    follower: Annotated[str, typer.Argument(metavar="FOLLOWER")],
    source: Annotated[str, typer.Argument(metavar="SOURCE")],
    keep_history: Annotated[
        bool,
        typer.Option("--keep-history", help="Leave what SOURCE already delivered in FOLLOWER."),
    ] = False,
) -> None:
    """Stop FOLLOWER following SOURCE (and remove what came through the follow)."""
    with _engine(ctx, "sync") as engine:
        removed = engine.unfollow(follower, source, keep_history=keep_history)
    if removed:
        kept = "kept" if keep_history else "removed"
        out.print(Text(f"{follower} no longer follows {source} (its activities {kept})"))
    else:
        out.print(Text(f"{follower} was not following {source}; nothing changed"))


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
        idled = engine.sweep_readers()
        changes = engine.reclassify(threshold)
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
) -> None:
    """Rebuild feeds in the timeline store from the canonical store (after a Redis
    flush or loss, or to repair): flat feeds get the newest max_length entries of
    their history; grouped feeds are regrouped, with their recorded seen/read marks."""
    if bool(feeds) == every:
        err.print("error: name feeds to rebuild, or pass --all")
        raise typer.Exit(2)
    with _engine(ctx, "manual") as engine, _ProgressBars(err) as report:
        chosen = engine.known_feeds() if every else list(feeds or [])
        report("rebuilt", 0, len(chosen))
        done = 0
        for _ in engine.rebuild(chosen):
            done += 1
            report("rebuilt", done, len(chosen))
    out.print(Text(f"{done} feed(s) rebuilt"))


@app.command("migrate")
def migrate_command(ctx: typer.Context) -> None:
    """Bring the database schema up to date and print its version."""
    with _reported_errors():
        url = _state(ctx).settings().database_url
        # Migrations concern the SQL database alone; opening a whole engine
        # would also connect to Redis when it is configured.
        db = Database(url)
        try:
            applied = db.migrate()
            with db.read() as conn:
                version = migrations.current_version(conn)
        finally:
            db.close()
    steps = f"applied {applied} step(s)" if applied else "already up to date"
    out.print(Text(f"schema version {version} ({steps}) on {_safe_url(url)}"))


def _safe_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


# -- demo ---------------------------------------------------------------------


class _ProgressBars:
    """``demo.seed``'s progress callback as one rich bar per phase (on stderr).

    The display starts with the first report, so input that ``seed`` refuses
    up front leaves nothing on screen but the error.
    """

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<11}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=4,  # the bars move slowly; spare the GIL for the work
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tasks:
            self._progress.stop()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self._tasks:
            self._progress.start()
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(task, completed=done, total=total)


@app.command("demo")
def demo_command(
    ctx: typer.Context,
    users: Annotated[int, typer.Option(help="Users, each with a user and a timeline feed.")] = (
        demo_data.DEFAULT_USERS
    ),
    activities: Annotated[int, typer.Option(help="Activities over the last 30 days.")] = (
        demo_data.DEFAULT_ACTIVITIES
    ),
    seed: Annotated[int, typer.Option(help="Same seed, same dataset.")] = demo_data.DEFAULT_SEED,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve/--no-serve", help="Then serve the API on 127.0.0.1:PORT (Ctrl-C stops it)."
        ),
    ] = True,
    port: Annotated[int, typer.Option(min=1, max=65_535, help="Port of the API.")] = DEFAULT_PORT,
    # Hidden: only tests need a smaller crowd of fans.
    fans: Annotated[int, typer.Option(hidden=True)] = demo_data.DEFAULT_FANS,
) -> None:
    """Seed a realistic social graph and activity stream, show some feeds, serve the API.

    Running it again on the same database reuses the dataset. Without a
    configured secret one is generated for the run; the curl lines printed
    before serving carry real tokens signed with it.
    """
    state = _state(ctx)
    # Before seeding: a bad secret should not cost a minute of seeding first.
    secret, generated = _secret(state, generate=True)
    # Manual delivery: publishing everything, then one drain, is far faster
    # than delivering each activity before the next is added.
    with _engine(ctx, "manual") as engine:
        started = time.perf_counter()
        with _ProgressBars(err) as progress:
            result = demo_data.seed(engine, users, activities, seed, fans=fans, progress=progress)
        elapsed = time.perf_counter() - started
        _show_feeds(engine, result.plan)
        _show_most_followed(engine, result.plan)
        _show_summary(engine, result, elapsed)
    out.print()
    _show_api(state, result.plan, secret, generated, port=port, serving=serve)
    if serve:
        _serve(state, host=LOCALHOST, port=port, workers=1)


def _showcase(engine: Tidings, plan: demo_data.DemoPlan) -> list[tuple[str, str]]:
    """``(feed, title)`` of the feeds worth a look."""
    star = plan.celebrities[0]
    followers = engine.counts(f"user:{star}")[0]
    shown = [
        (f"user:{star}", f"user:{star}: what {star}, the most followed ({followers:,}), did"),
        (f"notification:{star}", f"notification:{star}: likes, comments and mentions of {star}"),
    ]
    reader = plan.first_follower(f"user:{star}", "timeline:u")
    if reader is not None:
        following = engine.counts(reader)[1]
        shown.insert(0, (reader, f"{reader}: what a follower of {star} sees ({following} feeds)"))
        grouped = f"timeline_aggregated:{reader.partition(':')[2]}"
        shown.insert(1, (grouped, f"{grouped}: the same, grouped by actor, verb and day"))
    fan = plan.first_follower(f"user:{star}", "timeline:f")
    if fan is not None:
        shown.append((fan, f"{fan}: a fan's timeline"))
    return shown


def _show_feeds(engine: Tidings, plan: demo_data.DemoPlan) -> None:
    now = engine.clock()
    for feed, title in _showcase(engine, plan):
        # A heading, not a table title: titles wrap at the width of the table.
        out.print(Text(title, style="bold"))
        if engine.grouped(feed):
            groups = engine.read_groups(feed, limit=_DEMO_ROWS)
            out.print(group_table(groups.results, now=now))
        else:
            out.print(activity_table(engine.read(feed, limit=_DEMO_ROWS).results, now=now))
        out.print()


def _show_most_followed(engine: Tidings, plan: demo_data.DemoPlan) -> None:
    out.print(Text("most followed", style="bold"))
    table = Table()
    table.add_column("feed", style="cyan")
    table.add_column("followers", justify="right")
    for key in plan.ranking[:6]:
        table.add_row(Text(f"user:{key}"), f"{engine.counts(f'user:{key}')[0]:,}")
    out.print(table)
    out.print()


def _show_summary(engine: Tidings, result: demo_data.DemoResult, elapsed: float) -> None:
    plan, settings = result.plan, engine.settings
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    new_follows = f" ({result.new_follows:,} new)" if result.new_follows else ""
    rows = [
        ("users", f"{len(plan.users):,} (+ {len(plan.fans):,} fan timelines)"),
        ("follows", f"{len(plan.follows):,}{new_follows}"),
        ("activities", f"{len(plan.activities):,} over the last 30 days"),
        ("deliveries", f"{result.deliveries:,} drained"),
        ("store", f"{settings.store} timelines, canonical {_safe_url(settings.database_url)}"),
        ("time", f"{elapsed:.1f} s"),
    ]
    for name, value in rows:
        grid.add_row(name, Text(value))
    if result.reused:
        grid.add_row("note", Text("this dataset was already seeded; it was reused"))
    out.print(grid)


# -- the HTTP service ---------------------------------------------------------


def parse_ttl(text: str) -> int | None:
    """``30s``, ``15m``, ``1h`` or ``7d`` as seconds; ``none`` (no expiry) as None."""
    value = text.strip().lower()
    if value in _NO_EXPIRY:
        return None
    match = _TTL_RE.fullmatch(value)
    if match is None or int(match[1]) == 0:
        raise ValidationError(
            f"{text!r} is not a duration like 30s, 15m, 1h or 7d (or 'none')", field="ttl"
        )
    return int(match[1]) * _TTL_UNITS[match[2]]


def _secret(state: _State, *, generate: bool, hint: str = "") -> tuple[str, bool]:
    """The configured signing secret, or with ``generate`` a new one when there is none.

    Returns ``(secret, generated)``; a generated secret becomes part of the
    invocation's settings. No secret (without ``generate``) or a short one
    exits 2.
    """
    from tidings.http.app import MIN_SECRET_LENGTH

    with _reported_errors():
        secret = state.settings().secret
    if not secret:
        if not generate:
            _fail(
                "no secret to sign tokens with: set TIDINGS_SECRET (or secret in tidings.toml) "
                f"to a random string of at least {MIN_SECRET_LENGTH} characters, e.g. "
                "TIDINGS_SECRET=$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')"
                + hint
            )
        secret = secrets.token_urlsafe(48)
        state.use_secret(secret)
        return secret, True
    if len(secret) < MIN_SECRET_LENGTH:
        _fail(
            f"the secret (TIDINGS_SECRET or tidings.toml) is {len(secret)} characters; "
            f"it must be at least {MIN_SECRET_LENGTH} (shorter HS256 keys are brute-forceable)"
        )
    return secret, False


def _mint(secret: str, user: str | None, ttl: str | None) -> str:
    from tidings.http.auth import mint

    return mint(secret, user or "*", server=user is None, ttl_seconds=parse_ttl(ttl or "none"))


def _check_user(user: str) -> None:
    try:
        parse_feed_id(f"user:{user}")
    except InvalidFeedId:
        raise ValidationError(
            "must be a feed key: non-empty, only A-Z a-z 0-9 _ . @ = + -", field="user"
        ) from None


@app.command("token")
def token_command(
    ctx: typer.Context,
    user: Annotated[
        str | None,
        typer.Argument(
            metavar="[USER]",
            help="Act for USER: read feeds keyed by USER, publish and follow as USER.",
            show_default=False,
        ),
    ] = None,
    server: Annotated[
        bool, typer.Option("--server", help="A server token: it may do everything.")
    ] = False,
    ttl: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help=f"Expire after 30s, 15m, 1h, 7d... or 'none'. "
            f"Default: {DEFAULT_USER_TTL} for a USER, none for --server.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print a token for the HTTP API, signed with the configured secret."""
    if server == (user is not None):
        _fail("give either USER or --server")
    with _reported_errors():
        if user is not None:
            _check_user(user)
        parse_ttl(ttl or "none")  # a bad --ttl is reported before a missing secret
    secret, _ = _secret(_state(ctx), generate=False)
    typer.echo(_mint(secret, user, ttl or (None if server else DEFAULT_USER_TTL)))


@app.command("serve")
def serve_command(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Interface to listen on; 0.0.0.0 for all.")] = LOCALHOST,
    port: Annotated[int, typer.Option(min=1, max=65_535)] = DEFAULT_PORT,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=256, help="Processes, each with its own in-process delivery runner."
        ),
    ] = 1,
    dev: Annotated[
        bool,
        typer.Option(
            "--dev",
            help="Without a configured secret, generate one for this run; print tokens to try.",
        ),
    ] = False,
    keepalive: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            min=0.1,
            max=3600,
            help="Close a connection idle this long after a response. "
            "Default: TIDINGS_HTTP_KEEPALIVE_SECONDS, else 5.",
        ),
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            min=0.1,
            max=3600,
            help="Close a connection whose request header is not complete this long "
            "after it opened or after its last response. "
            "Default: TIDINGS_HTTP_HEADER_TIMEOUT_SECONDS, else 10.",
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=1,
            max=1_000_000,
            help="Per worker: answer 503 to a request arriving while N connections are "
            "open or N requests in progress. Default: TIDINGS_HTTP_MAX_CONNECTIONS, else 1000.",
        ),
    ] = None,
) -> None:
    """Serve the REST API with uvicorn until Ctrl-C.

    Tokens are signed with TIDINGS_SECRET (or secret in tidings.toml), at
    least 32 characters; `tidings token` mints them.
    """
    state = _state(ctx)
    limits = {
        "http_keepalive_seconds": keepalive,
        "http_header_timeout_seconds": header_timeout,
        "http_max_connections": max_connections,
    }
    state.override(**{name: str(value) for name, value in limits.items() if value is not None})
    secret, generated = _secret(
        state, generate=dev, hint="; or `tidings serve --dev` for a throwaway one"
    )
    # Once, here: migrating the schema before the workers start keeps them
    # from racing to do it, and a store that does not answer fails now, clearly.
    with _engine(ctx, "manual") as engine:
        engine.health()
        settings = engine.settings
    url = _base_url(host, port)
    plural = "s" if workers > 1 else ""
    out.print(
        Text(
            f"serving {url} ({workers} worker{plural}): {settings.store} timelines, "
            f"canonical {_safe_url(settings.database_url)}; OpenAPI docs at {url}/docs",
            style="bold",
        ),
        soft_wrap=True,
    )
    if dev:
        _show_dev_tokens(secret, generated, url)
    _serve(state, host=host, port=port, workers=workers)


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
        engine.health()
        settings = engine.settings
    try:
        from tidings.tasks.celery import run_worker
    except ModuleNotFoundError as exc:
        _fail(f"the worker needs Celery: pip install 'tidings[celery]' ({exc})", EXIT_FAILURE)
    with _reported_errors():
        names = [q.strip() for q in queues.split(",") if q.strip()]
        run_worker(settings, concurrency=concurrency, queues=names)


def _base_url(host: str, port: int) -> str:
    """Where a client on this machine reaches a server listening on ``host``."""
    if host in ("", "0.0.0.0", "::"):
        host = LOCALHOST
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _serve(state: _State, *, host: str, port: int, workers: int) -> None:
    import uvicorn

    from tidings.http.server import uvicorn_options

    options = uvicorn_options(state.settings())
    # Worker processes build their settings from the environment: hand them
    # what this invocation was given (global options, a generated secret).
    for name, value in state.overrides.items():
        os.environ[f"TIDINGS_{name.upper()}"] = value
    sys.stdout.flush()  # the tokens above, before uvicorn's log lines
    uvicorn.run(
        _SERVER_APP,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="info",
        **options,
    )


def _curl(url: str, token: str, body: dict[str, Any] | None = None) -> str:
    argv = ["curl", "-s", *(["-X", "POST"] if body else []), url]
    argv += ["-H", f"Authorization: Bearer {token}"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", orjson.dumps(body).decode()]
    return shlex.join(argv)


def _print_lines(rows: Sequence[tuple[str, str]]) -> None:
    # soft_wrap: rich must not break a token or a command over two lines.
    for text, style in rows:
        out.print(Text(text, style=style), soft_wrap=True)


def _token_command(secret: str, generated: bool, args: str) -> str:
    prefix = f"TIDINGS_SECRET={secret} " if generated else ""
    return f"{prefix}tidings token {args}"


def _show_dev_tokens(secret: str, generated: bool, url: str) -> None:
    server_token = _mint(secret, None, None)
    source = "generated for this run" if generated else "from TIDINGS_SECRET or tidings.toml"
    _print_lines(
        [
            (f"secret        {secret if generated else '(configured)'}  ({source})", ""),
            (f"server token  {server_token}", ""),
            (f"user tokens   {_token_command(secret, generated, 'alice --ttl 1h')}", ""),
            (f"try           {_curl(f'{url}/v1/feeds/timeline/alice', server_token)}", ""),
        ]
    )


def _show_api(
    state: _State,
    plan: demo_data.DemoPlan,
    secret: str,
    generated: bool,
    *,
    port: int,
    serving: bool,
) -> None:
    """Ready-to-paste curl lines with real tokens, for the server the demo starts."""
    url = _base_url(LOCALHOST, port)
    star = plan.celebrities[0]
    reader = plan.first_follower(f"user:{star}", "timeline:u") or f"timeline:{plan.users[0]}"
    user = reader.partition(":")[2]
    followed = {source for follower, source in plan.follows if follower == reader}
    other = next(k for k in plan.ranking if k != user and f"user:{k}" not in followed)
    server_token = _mint(secret, None, None)
    user_token = _mint(secret, user, _DEMO_TOKEN_TTL)
    post = {"actor": user, "verb": "post", "object": "status:hello", "extra": {"text": "hi"}}
    if serving:
        heading = f"the API: {url} (docs at {url}/docs); try these in another terminal"
    else:
        heading = f"the API, once served on port {port}; try these in another terminal"
    rows = [(heading, "bold")]
    if not serving:
        options = [f"--{k.replace('_', '-')}={v}" for k, v in state.overrides.items()]
        options = [o for o in options if not o.startswith("--secret=")]
        prefix = f"TIDINGS_SECRET={secret} " if generated else ""
        serve = shlex.join(["tidings", *options, "serve", "--port", str(port)])
        rows.append((f"{prefix}{serve}", ""))
    rows += [
        (f"# {user} reads their timeline (a user token, valid {_DEMO_TOKEN_TTL})", "dim"),
        (_curl(f"{url}/v1/feeds/timeline/{user}?limit=3", user_token), ""),
        (f"# the server token may read anything: {star}'s notifications", "dim"),
        (_curl(f"{url}/v1/feeds/notification/{star}?limit=3", server_token), ""),
        (f"# {user} posts: as itself, into its own feed (and so its timeline)", "dim"),
        (_curl(f"{url}/v1/feeds/user/{user}/activities", user_token, post), ""),
        (f"# timeline:{user} follows user:{other}, with the server token: a user", "dim"),
        ("# token follows only feeds it may read (its own, public groups')", "dim"),
        (
            _curl(
                f"{url}/v1/feeds/timeline/{user}/follows",
                server_token,
                {"source": f"user:{other}"},
            ),
            "",
        ),
        ("# 403: a user token may not read another user's timeline", "dim"),
        (_curl(f"{url}/v1/feeds/timeline/{other}", user_token), ""),
        (f"# more tokens: {_token_command(secret, generated, 'USER --ttl 1h')}", "dim"),
    ]
    if serving:
        rows.append(("serving until Ctrl-C", "bold"))
    _print_lines(rows)


if __name__ == "__main__":
    main()
