"""Live commands: ``tail`` (a feed's events) and ``firehose`` (filtered), one
JSON line per event.

With ``--url`` they read a running service's SSE stream (any deployment);
without, they subscribe through an engine of their own, which sees other
processes' events when the bus is Redis (``redis_url`` set).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import orjson
import typer

from tidings.cli.app import _engine, _fail, _reported_errors, app
from tidings.core.events import FIREHOSE, Event, EventType

UrlOpt = Annotated[
    str | None,
    typer.Option(help="A running service (e.g. http://127.0.0.1:8000): read its SSE stream."),
]
TokenOpt = Annotated[
    str | None, typer.Option(envvar="TIDINGS_TOKEN", help="Bearer token for --url.")
]
CountOpt = Annotated[
    int | None, typer.Option(help="Stop after this many events (default: run until Ctrl-C).")
]


def _print(event: Event) -> None:
    typer.echo(event.to_json().decode())


def _run(events: Iterator[Event], count: int | None) -> None:
    seen = 0
    try:
        for event in events:
            _print(event)
            seen += 1
            if event.type == EventType.ERROR or (count is not None and seen >= count):
                return
    except KeyboardInterrupt:
        return


def _sse(url: str, token: str | None, params: dict[str, str], feed: str) -> Iterator[Event]:
    """Events of an SSE stream (comments skipped)."""
    import httpx  # (only --url needs it: the CLI starts without it)

    headers = {"authorization": f"Bearer {token}"} if token else {}
    with (
        httpx.Client(timeout=httpx.Timeout(10, read=None), headers=headers) as client,
        client.stream("GET", url, params=params) as response,
    ):
        if response.status_code != 200:
            response.read()
            _fail(f"{url}: {response.status_code} {response.text[:300]}")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if not line:
                if "event" in fields:
                    yield Event(
                        feed,
                        fields.get("id", "0-0"),
                        fields["event"],
                        orjson.loads(fields.get("data", "{}")),
                    )
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value


@app.command("tail")
def tail_command(
    ctx: typer.Context,
    feed: Annotated[str, typer.Argument(metavar="FEED", help="A feed id, e.g. timeline:alice.")],
    last_event_id: Annotated[
        str | None, typer.Option(help="Replay the events after this id first.")
    ] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    count: CountOpt = None,
) -> None:
    """Print FEED's live events as they happen, one JSON line each."""
    if url is not None:
        group, _, key = feed.partition(":")
        params = {"last_event_id": last_event_id} if last_event_id else {}
        with _reported_errors():
            events = _sse(f"{url.rstrip('/')}/v1/feeds/{group}/{key}/events", token, params, feed)
            _run(events, count)
        return
    with _engine(ctx, "manual") as engine, engine.live.subscribe(feed, last_event_id) as sub:
        _run(iter(sub), count)


@app.command("firehose")
def firehose_command(
    ctx: typer.Context,
    track: Annotated[
        str | None, typer.Option(help="Phrases: comma = OR, space = AND (whole words).")
    ] = None,
    follow: Annotated[str | None, typer.Option(help="Actors, comma-separated.")] = None,
    locations: Annotated[
        str | None, typer.Option(help="Boxes: west,south,east,north[,...] over extra.lng/lat.")
    ] = None,
    sample: Annotated[str | None, typer.Option(help="A percentage, 0.01-100.")] = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
    count: CountOpt = None,
) -> None:
    """Print every activity published from now on that passes the filters (ORed)."""
    given = {"track": track, "follow": follow, "locations": locations, "sample": sample}
    if url is not None:
        params = {k: v for k, v in given.items() if v is not None}
        with _reported_errors():
            _run(_sse(f"{url.rstrip('/')}/v1/firehose", token, params, FIREHOSE), count)
        return
    with _engine(ctx, "manual") as engine, engine.live.firehose(**given) as sub:
        _run(iter(sub), count)
