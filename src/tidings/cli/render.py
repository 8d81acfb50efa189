"""What the commands print: activities and aggregates as tables or JSON, and
progress bars for the long ones. Tables go to stdout, progress and errors to
stderr."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
import typer
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

from tidings.core.activity import Activity
from tidings.core.aggregation import Aggregate, AggregatePage
from tidings.core.results import Page

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
_DATE_AFTER_SECONDS = 60 * 86_400
_DETAIL_KEYS = ("text", "title", "caption")


def print_json(value: Any) -> None:
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


def aggregate_page_json(page: AggregatePage) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [g.to_dict() for g in page.results], "next": page.next}
    if page.unseen is not None:
        body["unseen"], body["unread"] = page.unseen, page.unread
    return body


def headline(aggregate: Aggregate) -> str:
    """ "bob liked 3 photos", "alice and 4 others liked photo:17"."""
    names = list(dict.fromkeys(a.actor for a in aggregate.activities))
    who = names[0] if names else "someone"
    others = aggregate.actor_count - 1
    if others == 1 and len(names) > 1:
        who = f"{names[0]} and {names[1]}"
    elif others > 0:
        who = f"{who} and {others} others"
    objects = list(dict.fromkeys(a.object for a in aggregate.activities))
    if len(objects) == 1:
        what = objects[0]
    else:
        # "photo:17", "photo:18" -> "2 photos"; mixed kinds -> "2 items".
        kinds = {o.partition(":")[0] for o in objects if ":" in o}
        noun = f"{kinds.pop()}s" if len(kinds) == 1 else "items"
        what = f"{aggregate.activity_count} {noun}"
    return f"{who} {aggregate.verb} {what}"


def aggregate_table(aggregates: Sequence[Aggregate], *, now: datetime) -> Table:
    table = Table()
    table.add_column("when", style="dim", no_wrap=True)
    table.add_column("what", overflow="ellipsis", no_wrap=True, max_width=60)
    table.add_column("activities", justify="right")
    notification = any(g.is_seen is not None for g in aggregates)
    if notification:
        table.add_column("new", no_wrap=True)
    for g in aggregates:
        cells = [Text(ago(g.updated_at, now)), Text(headline(g)), Text(str(g.activity_count))]
        if notification:
            cells.append(Text("" if g.is_seen else "new", "bold yellow"))
        table.add_row(*cells)
    if not aggregates:
        table.caption = "no activities"
    return table


def print_aggregates(feed: str, page: AggregatePage, now: datetime) -> None:
    """``page`` as a table, its aggregates' ages as of ``now`` (the engine's clock)."""
    title = feed if page.unseen is None else f"{feed}  ({page.unseen} unseen, {page.unread} unread)"
    out.print(Text(title, style="bold"))
    out.print(aggregate_table(page.results, now=now))
    if page.next:
        out.print(Text(f"more: tidings read {feed} --cursor {page.next}", "dim"), soft_wrap=True)


def print_page(feed: str, page: Page[Activity], now: datetime) -> None:
    """``page`` as a table, its activities' ages as of ``now`` (the engine's clock)."""
    out.print(Text(feed, style="bold"))
    out.print(activity_table(page.results, now=now))
    if page.next:
        # soft_wrap: a cursor broken over two lines cannot be pasted back.
        out.print(Text(f"more: tidings read {feed} --cursor {page.next}", "dim"), soft_wrap=True)


def print_lines(rows: Sequence[tuple[str, str]]) -> None:
    # soft_wrap: rich must not break a token or a command over two lines.
    for text, style in rows:
        out.print(Text(text, style=style), soft_wrap=True)


# -- progress -----------------------------------------------------------------


class ProgressBars:
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

    def __enter__(self) -> ProgressBars:
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
