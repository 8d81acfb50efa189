"""The HTTP API from the command line: ``serve`` it, mint a ``token`` for it,
or seed a ``demo`` dataset, show some of its feeds and serve it.

``serve`` hands its settings to uvicorn's worker processes through
``TIDINGS_*`` environment variables, the only way they can receive them.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import shlex
import sys
from contextlib import ExitStack
from typing import Annotated, Any

import orjson
import typer
from rich.table import Table
from rich.text import Text

from tidings.cli import demo as demo_data
from tidings.cli.app import _engine, _fail, _reported_errors, _safe_url, _State, _state, app
from tidings.cli.render import ProgressBars, activity_table, aggregate_table, err, out, print_lines
from tidings.core.errors import InvalidFeedId, ValidationError
from tidings.core.feeds import parse_feed_id
from tidings.engine import Tidings
from tidings.settings import Settings

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
_DEMO_ROWS = 8


# -- demo ---------------------------------------------------------------------


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
        started = engine.clock.monotonic()
        with ProgressBars(err) as progress:
            result = demo_data.seed(engine, users, activities, seed, fans=fans, progress=progress)
        elapsed = engine.clock.monotonic() - started
        _show_feeds(engine, result.plan)
        _show_most_followed(engine, result.plan)
        _show_summary(engine, result, elapsed)
    out.print()
    _show_api(state, result.plan, secret, generated, port=port, serving=serve)
    if serve:
        # The web app, with a sign-in page that mints tokens: this is a
        # development server on 127.0.0.1, seeded with made-up people.
        state.override(
            web_app="true",
            web_app_dev_sign_in="true",
            web_app_users=",".join(_offered_users(result.plan)),
        )
        url = _base_url(LOCALHOST, port)
        out.print(Text(f"open {url}/ in a browser: the web app, as any demo user", style="bold"))
        _serve(state, host=LOCALHOST, port=port, workers=1)


def _offered_users(plan: demo_data.DemoPlan) -> list[str]:
    """Who the sign-in page offers: a follower of the most followed user (the
    reader the curl lines use), the most followed, then a few of the rest."""
    star = plan.celebrities[0]
    reader = plan.first_follower(f"user:{star}", "timeline:u")
    picks = [reader.partition(":")[2]] if reader else []
    picks += plan.ranking[:4] + plan.users[:8]
    return list(dict.fromkeys(picks))[:12]


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
        aggregated = f"timeline_aggregated:{reader.partition(':')[2]}"
        shown.insert(1, (aggregated, f"{aggregated}: the same, aggregated by actor, verb and day"))
    fan = plan.first_follower(f"user:{star}", "timeline:f")
    if fan is not None:
        shown.append((fan, f"{fan}: a fan's timeline"))
    return shown


def _show_feeds(engine: Tidings, plan: demo_data.DemoPlan) -> None:
    now = engine.clock.now()
    for feed, title in _showcase(engine, plan):
        # A heading, not a table title: titles wrap at the width of the table.
        out.print(Text(title, style="bold"))
        if engine.reads.is_aggregated(feed):
            aggregates = engine.read_aggregates(feed, limit=_DEMO_ROWS)
            out.print(aggregate_table(aggregates.results, now=now))
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
        ("# for the Python and JS clients (docs/getting-started): the server token", "dim"),
        (f"export TIDINGS_TOKEN={server_token}", ""),
        (f"# {user} reads their timeline (a user token, valid {_DEMO_TOKEN_TTL})", "dim"),
        (_curl(f"{url}/v1/feeds/timeline/{user}?limit=3", user_token), ""),
        (f"# the server token may read anything: {star}'s notifications", "dim"),
        (_curl(f"{url}/v1/feeds/notification/{star}?limit=3", server_token), ""),
        (f"# {user} posts: as itself, into its own feed (and so its timeline)", "dim"),
        (_curl(f"{url}/v1/feeds/user/{user}/activities", user_token, post), ""),
        (f"# timeline:{user} follows user:{other}: profile feeds are public, so a", "dim"),
        ("# user token may read and follow them", "dim"),
        (
            _curl(
                f"{url}/v1/feeds/timeline/{user}/follows",
                user_token,
                {"source": f"user:{other}"},
            ),
            "",
        ),
        ("# 403: a user token may not read another user's timeline", "dim"),
        (_curl(f"{url}/v1/feeds/timeline/{other}", user_token), ""),
        (f"# more tokens: {_token_command(secret, generated, 'USER --ttl 1h')}", "dim"),
    ]
    if generated:  # (a secret the operator chose is never printed)
        rows.append((f"export TIDINGS_SECRET={secret}  # then: tidings token --server", ""))
    if serving:
        rows.append(("serving until Ctrl-C", "bold"))
    print_lines(rows)


# -- tokens -------------------------------------------------------------------


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


# -- the HTTP service ---------------------------------------------------------


# The options of ``serve``, declared here so that its signature stays readable.
_Host = Annotated[str, typer.Option(help="Interface to listen on; 0.0.0.0 for all.")]
_Port = Annotated[int, typer.Option(min=1, max=65_535)]
_Workers = Annotated[
    int,
    typer.Option(min=1, max=256, help="Processes, each with its own in-process delivery runner."),
]
_Dev = Annotated[
    bool,
    typer.Option(
        "--dev", help="Without a configured secret, generate one for this run; print tokens to try."
    ),
]
_App = Annotated[
    bool,
    typer.Option(
        "--app",
        help="Serve the web app at / too. With --dev, its sign-in page mints a token for "
        "whichever user is picked; without, people sign in with a token (tidings token).",
    ),
]
_Keepalive = Annotated[
    float | None,
    typer.Option(
        metavar="SECONDS",
        min=0.1,
        max=3600,
        help="Close a connection idle this long after a response. "
        "Default: TIDINGS_HTTP_KEEPALIVE_SECONDS, else 5.",
    ),
]
_HeaderTimeout = Annotated[
    float | None,
    typer.Option(
        metavar="SECONDS",
        min=0.1,
        max=3600,
        help="Close a connection whose request header is not complete this long "
        "after it opened or after its last response. "
        "Default: TIDINGS_HTTP_HEADER_TIMEOUT_SECONDS, else 10.",
    ),
]
_MaxConnections = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        min=1,
        max=1_000_000,
        help="Per worker: answer 503 to a request arriving while N connections are "
        "open or N requests in progress. Default: TIDINGS_HTTP_MAX_CONNECTIONS, else 1000.",
    ),
]

_MaxHeaderBytes = Annotated[
    int | None,
    typer.Option(
        metavar="BYTES",
        min=1024,
        max=16 * 1024 * 1024,
        help="Answer 431 to a request whose request line and headers are larger. "
        "Default: TIDINGS_HTTP_MAX_HEADER_BYTES, else 65536.",
    ),
]
_AccessLog = Annotated[
    bool,
    typer.Option(
        "--access-log/--no-access-log",
        help="A log line per request (uvicorn's). Under a heavy load it costs a worker "
        "about a twentieth of its CPU; /metrics counts requests by route and status either way.",
    ),
]


@app.command("serve")
def serve_command(
    ctx: typer.Context,
    host: _Host = LOCALHOST,
    port: _Port = DEFAULT_PORT,
    workers: _Workers = 1,
    dev: _Dev = False,
    web_app: _App = False,
    keepalive: _Keepalive = None,
    header_timeout: _HeaderTimeout = None,
    max_connections: _MaxConnections = None,
    max_header_bytes: _MaxHeaderBytes = None,
    access_log: _AccessLog = True,
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
        "http_max_header_bytes": max_header_bytes,
    }
    state.override(**{name: str(value) for name, value in limits.items() if value is not None})
    if web_app:
        state.override(web_app="true", web_app_dev_sign_in="true" if dev else "false")
    with _reported_errors():
        dev_sign_in = state.settings().web_app and state.settings().web_app_dev_sign_in
    if dev_sign_in and not _is_loopback(host):
        # Anyone who reaches the sign-in page may act as any user.
        _fail(
            f"the web app's development sign-in mints a token for anyone who asks: it serves "
            f"only on a loopback address, not {host} (drop --dev, or "
            "TIDINGS_WEB_APP_DEV_SIGN_IN, to sign in with tokens)"
        )
    secret, generated = _secret(
        state, generate=dev, hint="; or `tidings serve --dev` for a throwaway one"
    )
    # Once, here: migrating the schema before the workers start keeps them
    # from racing to do it, and a store that does not answer fails now, clearly.
    with _engine(ctx, "manual") as engine:
        engine.admin.health()
        settings = engine.settings
    url = _base_url(host, port)
    _show_serving(settings, url, workers, dev_sign_in)
    if dev:
        _show_dev_tokens(secret, generated, url)
    if workers > 1 and not state.settings().redis_url:
        # The in-process bus is one process's: a client of one worker would
        # not see what another worker's runner delivered.
        err.print(
            "warning: live events (SSE, WebSocket, firehose) with several workers need "
            "TIDINGS_REDIS_URL; without it each worker sees only its own deliveries"
        )
    _serve(state, host=host, port=port, workers=workers, access_log=access_log)


def _show_serving(settings: Settings, url: str, workers: int, dev_sign_in: bool) -> None:
    plural = "s" if workers > 1 else ""
    out.print(
        Text(
            f"serving {url} ({workers} worker{plural}): {settings.store} timelines, "
            f"canonical {_safe_url(settings.database_url)}; OpenAPI docs at {url}/docs",
            style="bold",
        ),
        soft_wrap=True,
    )
    if settings.web_app:
        sign_in = (
            "development sign-in: anyone reaching it may act as any user"
            if dev_sign_in
            else "sign in with a user token"
        )
        out.print(Text(f"web app       {url}/  ({sign_in})", style="bold"), soft_wrap=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _base_url(host: str, port: int) -> str:
    """Where a client on this machine reaches a server listening on ``host``."""
    if host in ("", "0.0.0.0", "::"):
        host = LOCALHOST
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _serve(state: _State, *, host: str, port: int, workers: int, access_log: bool = True) -> None:
    import uvicorn

    from tidings.http.multiprocess import shared_metrics
    from tidings.http.server import uvicorn_options
    from tidings.task_runners.metrics import share

    settings = state.settings()
    options = uvicorn_options(settings)
    # Worker processes build their settings from the environment: hand them
    # what this invocation was given (global options, a generated secret).
    for name, value in state.overrides.items():
        os.environ[f"TIDINGS_{name.upper()}"] = value
    sys.stdout.flush()  # the tokens above, before uvicorn's log lines
    with ExitStack() as stack:
        if settings.metrics_dir:
            # The deployment's directory, shared with its Celery workers: kept.
            share(settings.metrics_dir)
        elif workers > 1:
            # Before the workers start: each writes its metrics there, and a
            # scrape of any of them reports all (one worker runs in this process).
            stack.enter_context(shared_metrics())
        uvicorn.run(
            _SERVER_APP,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="info",
            access_log=access_log,
            **options,
        )


def _curl(url: str, token: str, body: dict[str, Any] | None = None) -> str:
    argv = ["curl", "-s", *(["-X", "POST"] if body else []), url]
    argv += ["-H", f"Authorization: Bearer {token}"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "-d", orjson.dumps(body).decode()]
    return shlex.join(argv)


def _token_command(secret: str, generated: bool, args: str) -> str:
    prefix = f"TIDINGS_SECRET={secret} " if generated else ""
    return f"{prefix}tidings token {args}"


def _show_dev_tokens(secret: str, generated: bool, url: str) -> None:
    server_token = _mint(secret, None, None)
    source = "generated for this run" if generated else "from TIDINGS_SECRET or tidings.toml"
    print_lines(
        [
            (f"secret        {secret if generated else '(configured)'}  ({source})", ""),
            (f"server token  {server_token}", ""),
            (f"user tokens   {_token_command(secret, generated, 'alice --ttl 1h')}", ""),
            (f"try           {_curl(f'{url}/v1/feeds/timeline/alice', server_token)}", ""),
        ]
    )
