"""The web app's routes: its page, its static files, avatars and the session."""

# No `from __future__ import annotations`: FastAPI reads these annotations at runtime.
import os
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from tidings.core.errors import ValidationError
from tidings.core.users import check_user_id
from tidings.engine import Tidings
from tidings.http import auth
from tidings.http.problems import problem
from tidings.http.responses import json_response
from tidings.settings import Settings
from tidings.webapp.avatars import avatar_svg
from tidings.webapp.groups import app_groups

STATIC = Path(__file__).parent / "static"
#: Where the page imports the JS client from (``./tidings.mjs`` of its modules).
CLIENT_URL = "/static/js/tidings.mjs"
#: The client's one source, in a checkout (``PYTHONPATH=src``, an editable
#: install); and the copy a wheel holds, made from it by ``setup.py``.
CHECKOUT_CLIENT = Path(__file__).resolve().parents[3] / "clients" / "js" / "tidings.mjs"
PACKAGED_CLIENT = STATIC / "js" / "tidings.mjs"
#: How long a token the development sign-in mints lives.
DEV_TOKEN_SECONDS = 86_400
#: Where the development sign-in answers, besides the address served on and
#: ``web_app_hosts``.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Users the sign-in page lists at most.
MAX_OFFERED_USERS = 24
#: Everything the page loads comes from this server; the config is JSON in a
#: non-executed script element, so no inline script is needed either.
_CSP = (
    "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_CONFIG_MARK = "<!--config-->"
#: Browsers run a module script only when it comes with a JavaScript type;
#: Python's guess comes from the machine's mime.types, which may not know
#: ``.mjs`` (or may map ``.js`` to something else).
_SCRIPT_SUFFIXES = (".mjs", ".js")


class _StaticFiles(StaticFiles):
    """The app's files, its ES modules always as ``text/javascript``."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        if str(full_path).endswith(_SCRIPT_SUFFIXES):
            response.headers["content-type"] = "text/javascript; charset=utf-8"
        return response


def install(app: FastAPI, settings: Settings) -> None:
    """Serve the web app from ``app``: the page at ``/``, its files at ``/static``."""
    app.include_router(_router(settings))
    app.mount("/static", _StaticFiles(directory=STATIC), name="static")


def client_file() -> Path:
    """The JS client the page loads: a checkout's ``clients/js/tidings.mjs``
    (first, so a stray copy in the package directory is never served), else
    the copy the wheel holds."""
    for path in (CHECKOUT_CLIENT, PACKAGED_CLIENT):
        if path.is_file():
            return path
    raise RuntimeError(
        f"the web app needs the JS client: neither {CHECKOUT_CLIENT} (a checkout) "
        f"nor {PACKAGED_CLIENT} (a wheel, copied there by setup.py) exists"
    )


def _router(settings: Settings) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    template = (STATIC / "index.html").read_text()
    if template.count(_CONFIG_MARK) != 1:
        raise RuntimeError(f"{STATIC / 'index.html'} must hold {_CONFIG_MARK} once")
    dev = settings.web_app_dev_sign_in
    hosts = LOOPBACK_HOSTS | settings.web_app_hosts
    offered = settings.web_app_user_ids[:MAX_OFFERED_USERS]
    groups = app_groups(settings)
    client = client_file()

    @router.get("/")
    async def page(request: Request) -> Response:
        engine: Tidings = request.app.state.engine
        users = await run_in_threadpool(_users, engine, offered) if dev else []
        config = {"devSignIn": dev, "users": users, "groups": groups}
        data = _script_json(config)
        body = template.replace(
            _CONFIG_MARK,
            f'<script id="tidings-config" type="application/json">{data}</script>',
        )
        return Response(
            body,
            media_type="text/html; charset=utf-8",
            headers={"content-security-policy": _CSP, "cache-control": "no-cache"},
        )

    @router.get(CLIENT_URL)
    async def client_module() -> Response:
        """The JS client, one file shared with the npm package (see setup.py)."""
        return FileResponse(client, media_type="text/javascript; charset=utf-8")

    @router.get("/app/avatars/{user}.svg")
    async def avatar(user: str) -> Response:
        try:
            check_user_id(user)
        except ValidationError as exc:
            return problem(404, f"no avatar for {user[:64]!r}: a user id {exc.detail}")
        return Response(
            avatar_svg(user),
            media_type="image/svg+xml",
            headers={"cache-control": "public, max-age=86400"},
        )

    @router.get("/app/session")
    async def whoami(request: Request) -> Response:
        """Who the bearer token is for: the page checks a pasted token with it."""
        who = _principal(request)
        return json_response({"user": who.subject, "server": who.server, "firehose": who.firehose})

    @router.post("/app/session")
    async def sign_in(request: Request) -> Response:
        """Development servers only: a user token for the user named."""
        return await _sign_in(request, dev, hosts)

    return router


async def _sign_in(request: Request, dev: bool, hosts: frozenset[str]) -> Response:
    if not dev:
        return problem(
            403,
            "signing in by picking a user is for development servers (tidings demo, "
            "tidings serve --app --dev); sign in with a token your application minted "
            "(tidings token USER)",
        )
    refused = _check_caller(request, hosts)
    if refused is not None:
        return refused
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return problem(400, 'the body must be JSON: {"user": "<user id>"}')
    user = body.get("user") if isinstance(body, dict) else None
    try:
        check_user_id(user)
    except ValidationError as exc:
        return problem(422, f"user: a user id {exc.detail}", field="user")
    assert isinstance(user, str)
    secret: str = request.app.state.tokens.secret
    now = request.app.state.tokens.now  # (the engine's clock)
    token = auth.mint(secret, user, ttl_seconds=DEV_TOKEN_SECONDS, scopes=["firehose"], now=now)
    return json_response({"user": user, "token": token, "expires_in": DEV_TOKEN_SECONDS})


def _check_caller(request: Request, hosts: frozenset[str]) -> Response | None:
    """Whether the development sign-in answers this request: a 403 or 415 problem
    when not. A page of another site can rebind its name to this machine and
    post here as same-origin: its ``Host`` (and ``Origin``) then name that
    site, not one of ``hosts`` or the address served on. A body that is not
    declared JSON is refused as well: JSON is no "simple" request, so a
    browser asks before sending it cross-origin, and nothing here says yes."""
    served = request.scope.get("server")
    allowed = (hosts | {served[0].lower()}) if served else hosts
    host = host_name(request.headers.get("host", ""))
    if host not in allowed:
        return problem(
            403,
            f"the development sign-in answers only under {', '.join(sorted(allowed))} "
            f"(any port), not Host {request.headers.get('host', '')[:100]!r}: "
            "add a name to web_app_hosts (TIDINGS_WEB_APP_HOSTS) to allow it",
        )
    origin = request.headers.get("origin")
    if origin is not None and _origin_host(origin) not in allowed:
        return problem(
            403,
            f"the development sign-in answers only pages of this server, not Origin "
            f"{origin[:100]!r}",
        )
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        return problem(
            415,
            f"the body must be JSON, sent as Content-Type: application/json (not "
            f'{media_type[:60] or "none"!r}): {{"user": "<user id>"}}',
        )
    return None


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``name:port``, ``[v6]:port``), lower case,
    without brackets or port; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        port_ok = rest == "" or (rest[0] == ":" and rest[1:].isdigit())
        return name if bracket and port_ok else None
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name.rstrip(".") or None


def _origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` (``http://name:port``); None for ``null`` or
    anything else."""
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
        return None
    return host_name(rest)


def _principal(request: Request) -> auth.Principal:
    tokens: auth.TokenCache = request.app.state.tokens
    return tokens.verify(request.headers.get("authorization"))


def _script_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script>`` element: ``<``, ``>`` and
    ``&`` escaped, so no text (a user's name, say) can end the element or
    open a comment that swallows the page (``<!--<script>``)."""
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _users(engine: Tidings, ids: list[str]) -> list[dict[str, Any]]:
    """The offered users as the sign-in page lists them, looked up in one batch
    as enrichment does (ids nobody has, or had, as ids)."""
    items: list[dict[str, Any]] = [{"actor": user_id} for user_id in ids]
    engine.reads.enrich(items, "name")
    users: list[dict[str, Any]] = []
    for user_id, item in zip(ids, items, strict=True):
        user = item["actor"]
        if not isinstance(user, dict) or user.get("deleted"):
            users.append({"id": user_id, "handle": user_id, "name": user_id})
            continue
        name = user["profile"].get("name")
        handle = user["handle"]
        users.append(
            {"id": user_id, "handle": handle, "name": name if isinstance(name, str) else handle}
        )
    return users
