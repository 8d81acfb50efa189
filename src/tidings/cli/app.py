"""The ``tidings`` Typer app: its global options, and how failures are reported.

Settings are read once per invocation: ``TIDINGS_*`` variables and
``tidings.toml`` as everywhere, with the global ``--database-url`` and
``--redis-url`` options winning over both.

Errors tidings raises on purpose (:class:`tidings.TidingsError`) are the
caller's input, not a bug: they print one red line on stderr and exit with
status 2, the status of a usage error, never with a traceback.

The commands live in modules by theme (``feeds``, ``admin``, ``serve``) that
register on ``app``; ``tidings.cli`` imports them.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError as SettingsError
from rich.text import Text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from tidings.cli.render import err
from tidings.core.errors import TidingsError, ValidationError
from tidings.engine import TaskRunnerChoice, Tidings
from tidings.settings import Settings

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

app = typer.Typer(
    help="Activity feeds: publish, follow and read from the command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold URLs with passwords
)


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
            help="Canonical store, e.g. sqlite:///tidings.canonical.db or postgresql+psycopg://... "
            "Default: TIDINGS_DATABASE_URL, else tidings.toml, else sqlite:///tidings.canonical.db.",
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


# -- what every command uses --------------------------------------------------


def _state(ctx: typer.Context) -> _State:
    state = ctx.find_object(_State)
    if state is None:  # a command invoked without the app's callback (embedding)
        state = _State({})
    return state


@contextmanager
def _engine(ctx: typer.Context, task_runner: TaskRunnerChoice) -> Iterator[Tidings]:
    """An engine on the invocation's settings, closed on the way out; errors reported."""
    with _reported_errors(), Tidings(_state(ctx).settings(), task_runner=task_runner) as engine:
        yield engine


def _safe_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)
