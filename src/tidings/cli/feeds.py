"""Feed commands: ``read``, ``add``, ``follow`` and ``unfollow``."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import typer
from rich.text import Text

from tidings.cli.app import _engine, _reported_errors, app
from tidings.cli.render import (
    aggregate_page_json,
    err,
    out,
    print_aggregates,
    print_json,
    print_page,
)
from tidings.core.errors import ValidationError

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
    """Print a page of FEED, newest first (aggregates, for aggregated and notification feeds)."""
    with _engine(ctx, "manual") as engine:
        if engine.reads.is_aggregated(feed):
            aggregates = engine.read_aggregates(feed, limit=limit, cursor=cursor)
            if as_json:
                print_json(aggregate_page_json(aggregates))
            else:
                print_aggregates(feed, aggregates, engine.clock.now())
            return
        page = engine.read(feed, limit=limit, cursor=cursor)
        now = engine.clock.now()
    if as_json:
        print_json({"results": [a.to_dict() for a in page.results], "next": page.next})
    else:
        print_page(feed, page, now)


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
        stored, created = engine.activities.publish(feed, data)
    if not created:
        err.print(Text(f"{feed} already has foreign_id {foreign_id}: nothing changed", "yellow"))
    print_json(stored.to_dict())


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
