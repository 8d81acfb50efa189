"""``manage.py tidings_import actstream|notifications``: bring what
django-activity-stream or django-notifications-hq holds into tidings (the
work is :mod:`tidings.contrib.django.imports`; this is its command line)."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeRemainingColumn
from rich.progress import Progress as Bar

from tidings.contrib.django.engine import _config
from tidings.contrib.django.imports import (
    SourceMissing,
    Tally,
    deliver_all,
    import_actstream,
    import_notifications,
)
from tidings.core.limits import LEASE_MS
from tidings.engine import Tidings
from tidings.settings import Settings

MAX_BATCH_SIZE = 10_000
SOURCES = ("actstream", "notifications")


class Lines:
    """Progress as a line per batch on stdout (``-v 2``): for logs and scripts."""

    def __init__(self, command: BaseCommand) -> None:
        self.command = command
        self.table, self.total, self.done = "", 0, 0

    def begin(self, table: str, total: int) -> None:
        self.table, self.total, self.done = table, total, 0

    def advance(self, rows: int) -> None:
        self.done += rows
        self.command.stdout.write(f"{self.table}: {self.done:,}/{self.total:,}")
        self.command.stdout.flush()


class ProgressBar:
    """Progress as a rich bar on stderr (a terminal only)."""

    def __init__(self, console: Console | None = None) -> None:
        self.bar = Bar(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
        )
        self.task: TaskID | None = None

    def __enter__(self) -> ProgressBar:
        self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.stop()

    def begin(self, table: str, total: int) -> None:
        self.task = self.bar.add_task(table, total=total)

    def advance(self, rows: int) -> None:
        if self.task is not None:
            self.bar.advance(self.task, rows)


class Command(BaseCommand):  # type: ignore[misc]
    help = (
        "Import django-activity-stream's actions and follows (actstream) and/or "
        "django-notifications-hq's notifications (notifications) into tidings. "
        "Running it again adds nothing; a run that was cut short is finished by the next."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "sources", nargs="+", choices=SOURCES, metavar="{actstream,notifications}"
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=1000,
            help=f"rows read, written and delivered at a time (1 to {MAX_BATCH_SIZE:,})",
        )
        parser.add_argument(
            "--group",
            default="notification",
            help="notifications: the notification feed group (default: notification)",
        )
        parser.add_argument(
            "--no-progress", action="store_true", help="no progress bar (none without a terminal)"
        )
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help=(
                "return without waiting for deliveries another process claimed (a run "
                "that was killed: its claims lapse within a minute)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        size = options["batch_size"]
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be from 1 to {MAX_BATCH_SIZE:,}, got {size}")
        try:
            # Its own engine, delivering in this thread (drained batch by batch),
            # so that everything is delivered when the command returns.
            feeds = Tidings(Settings(**_config()[0]), task_runner="manual")
        except ValueError as exc:  # pydantic's, for a TIDINGS setting
            raise CommandError(f"settings.TIDINGS: {exc}") from None
        try:
            tallies = self._run(feeds, options)
            wait = 0 if options["no_wait"] else LEASE_MS / 1000 + 5
            if wait and feeds.admin.pending():
                self.stderr.write("waiting for deliveries claimed by another process ...")
            pending = deliver_all(feeds, wait_seconds=wait)
        except (SourceMissing, ImproperlyConfigured, ValueError) as exc:
            raise CommandError(str(exc)) from None
        finally:
            feeds.close()
        for tally in tallies:
            self.stdout.write(tally.line())
        if pending:
            self.stderr.write(
                f"{pending:,} deliveries wait in the outbox, claimed by another process: a "
                "tidings runner (or this command run again) delivers them once the claim lapses"
            )

    def _run(self, feeds: Tidings, options: dict[str, Any]) -> list[Tally]:
        if options["verbosity"] >= 2:
            return self._import(feeds, options, Lines(self))
        if options["no_progress"] or not sys.stderr.isatty():
            return self._import(feeds, options, None)
        with ProgressBar() as bar:
            return self._import(feeds, options, bar)

    def _import(
        self, feeds: Tidings, options: dict[str, Any], progress: Lines | ProgressBar | None
    ) -> list[Tally]:
        size, tallies = options["batch_size"], []
        for source in dict.fromkeys(options["sources"]):
            if source == "actstream":
                tallies += import_actstream(feeds, batch_size=size, progress=progress)
            else:
                tallies += import_notifications(
                    feeds, group=options["group"], batch_size=size, progress=progress
                )
        return tallies
