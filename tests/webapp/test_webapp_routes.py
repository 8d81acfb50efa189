"""The web app's server side: its page, static files, avatars and sessions."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from http_server import SECRET, LiveApi, live_api, tidings_serve
from tidings.http.auth import verify
from tidings.settings import Settings
from tidings.webapp.groups import app_groups
from tidings.webapp.routes import (
    CHECKOUT_CLIENT,
    CLIENT_URL,
    DEV_TOKEN_SECONDS,
    PACKAGED_CLIENT,
    STATIC,
    client_file,
    host_name,
)
from webapp_modules import load_modules


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[LiveApi]:
    with live_api(
        "sql",
        f"sqlite:///{tmp_path / 'a.db'}",
        web_app=True,
        web_app_dev_sign_in=True,
        web_app_users="alice,nobody",
    ) as api:
        api.engine.users.create("alice", "Alice", {"name": "Alice </script> <!--<script> & A."})
        yield api


@pytest.fixture
def production(tmp_path: Path) -> Iterator[LiveApi]:
    with live_api("sql", f"sqlite:///{tmp_path / 'p.db'}", web_app=True) as api:
        yield api


def test_the_page_is_served_with_its_config_and_a_strict_csp(dev: LiveApi) -> None:
    page = httpx.get(f"{dev.url}/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    found = re.search(
        r'<script id="tidings-config" type="application/json">(.*?)</script>', page.text
    )
    assert found is not None
    # A name cannot end the element early, nor open a comment that swallows the page.
    assert not {"<", ">", "&"} & set(found[1])
    config = json.loads(found[1])
    assert config == {
        "devSignIn": True,
        "users": [
            {"id": "alice", "handle": "Alice", "name": "Alice </script> <!--<script> & A."},
            {"id": "nobody", "handle": "nobody", "name": "nobody"},
        ],
        "groups": {
            "home": "timeline",
            "profile": "user",
            "aggregated": "timeline_aggregated",
            "ranked": "timeline_ranked",
            "notifications": "notification",
        },
    }


def test_production_offers_no_users_and_mints_no_tokens(production: LiveApi) -> None:
    page = httpx.get(f"{production.url}/")
    assert '{"devSignIn":false,"users":[],"groups":{' in page.text
    refused = httpx.post(f"{production.url}/app/session", json={"user": "alice"})
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert "tidings token USER" in refused.json()["detail"]


def test_the_development_sign_in_mints_a_user_token_with_the_firehose(dev: LiveApi) -> None:
    made = httpx.post(f"{dev.url}/app/session", json={"user": "bob"})
    assert made.status_code == 200
    body = made.json()
    assert body["user"] == "bob"
    assert body["expires_in"] == DEV_TOKEN_SECONDS
    principal = verify(SECRET, f"Bearer {body['token']}")
    assert principal.subject == "bob"
    assert not principal.server
    assert principal.firehose
    whoami = httpx.get(
        f"{dev.url}/app/session", headers={"Authorization": f"Bearer {body['token']}"}
    )
    assert whoami.json() == {"user": "bob", "server": False, "firehose": True}


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (b"not json", 400, "must be JSON"),
        (b"[]", 422, "a user id must be 1-255"),
        (b'{"user": ""}', 422, "a user id must be 1-255"),
        (b'{"user": "a b"}', 422, "a user id must be 1-255"),
        (b'{"user": 7}', 422, "a user id must be 1-255"),
        (b'{"user": "' + b"x" * 300 + b'"}', 422, "1-255"),
    ],
)
def test_bad_sign_ins_say_what_was_wrong(
    dev: LiveApi, body: bytes, status: int, detail: str
) -> None:
    refused = httpx.post(
        f"{dev.url}/app/session", content=body, headers={"content-type": "application/json"}
    )
    assert refused.status_code == status
    assert detail in refused.json()["detail"]


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("headers", "status", "detail"),
    [
        # The request: a page of evil.example rebound to 127.0.0.1.
        (
            {"host": "evil.example", "origin": "http://evil.example", "content-type": "text/plain"},
            403,
            "not Host 'evil.example'",
        ),
        ({**JSON, "host": "evil.example"}, 403, "web_app_hosts"),
        ({**JSON, "host": "evil.example:8000"}, 403, "not Host"),
        ({**JSON, "host": "localhost.evil.example"}, 403, "not Host"),
        ({**JSON, "host": "localhost:x"}, 403, "not Host"),
        ({**JSON, "origin": "http://evil.example"}, 403, "not Origin"),
        ({**JSON, "origin": "null"}, 403, "not Origin"),
        ({**JSON, "origin": "http://localhost.evil.example:8000"}, 403, "not Origin"),
        ({"content-type": "text/plain"}, 415, "Content-Type: application/json"),
        ({"content-type": "application/x-www-form-urlencoded"}, 415, "application/json"),
        ({}, 415, "none"),
    ],
)
def test_the_development_sign_in_answers_only_its_own_pages(
    dev: LiveApi, headers: dict[str, str], status: int, detail: str
) -> None:
    """Host and Origin must name this server (DNS rebinding), and the body be
    declared JSON (no "simple" cross-origin request): else no token."""
    refused = httpx.post(f"{dev.url}/app/session", content=b'{"user": "bob"}', headers=headers)
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert detail in refused.json()["detail"]
    assert "token" not in refused.json()


@pytest.mark.parametrize(
    "headers",
    [
        {},  # httpx: Host 127.0.0.1:<port>, no Origin (not a browser)
        {"host": "localhost:1234", "origin": "http://localhost:5173"},
        {"host": "LOCALHOST.", "origin": "https://127.0.0.1"},
        {"host": "[::1]:8000", "origin": "http://[::1]:8000"},
        {"host": "[::1]"},
        {"content-type": "application/json; charset=utf-8"},
    ],
)
def test_the_development_sign_in_answers_on_loopback_names(
    dev: LiveApi, headers: dict[str, str]
) -> None:
    made = httpx.post(
        f"{dev.url}/app/session", content=b'{"user": "bob"}', headers={**JSON, **headers}
    )
    assert made.status_code == 200, made.text


def test_more_host_names_are_configured(tmp_path: Path) -> None:
    with live_api(
        "sql",
        f"sqlite:///{tmp_path / 'h.db'}",
        web_app=True,
        web_app_dev_sign_in=True,
        web_app_hosts=["Dev.Test"],
    ) as api:
        url = f"{api.url}/app/session"
        named = {**JSON, "host": "dev.test:8000", "origin": "http://dev.test:8000"}
        assert httpx.post(url, json={"user": "bob"}, headers=named).status_code == 200
        other = {**JSON, "host": "evil.example"}
        assert httpx.post(url, json={"user": "bob"}, headers=other).status_code == 403
    with pytest.raises(ValueError, match="web_app_hosts"):
        Settings(web_app_hosts=frozenset({"http://dev.test"}))


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8000", "localhost"),
        ("localhost.:80", "localhost"),
        ("127.0.0.1:8000", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("[::1]x", None),
        ("[::1", None),
        ("::1", None),
        ("localhost:", None),
        ("localhost:80x", None),
        ("", None),
    ],
)
def test_host_names_of_host_headers(header: str, host: str | None) -> None:
    assert host_name(header) == host


def test_whoami_needs_a_token(dev: LiveApi) -> None:
    assert httpx.get(f"{dev.url}/app/session").status_code == 401
    bad = httpx.get(f"{dev.url}/app/session", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401


def test_avatars_are_drawn_here_and_cached(dev: LiveApi) -> None:
    got = httpx.get(f"{dev.url}/app/avatars/alice.svg")
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/svg+xml"
    assert "max-age" in got.headers["cache-control"]
    assert got.text == httpx.get(f"{dev.url}/app/avatars/alice.svg").text
    assert httpx.get(f"{dev.url}/app/avatars/a%20b.svg").status_code == 404


def test_static_files_are_served_and_fetch_nothing_from_elsewhere(dev: LiveApi) -> None:
    for name in ("app.css", "favicon.svg"):
        got = httpx.get(f"{dev.url}/static/{name}")
        assert got.status_code == 200, name
    for path in [*STATIC.rglob("*"), CHECKOUT_CLIENT]:
        if path.is_dir():
            continue
        text = path.read_text()
        # No CDN, no web font, no analytics: only the SVG namespace is a URL.
        urls = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, f"{path.name} names {urls}"


def test_every_module_the_page_loads_is_served_as_javascript(dev: LiveApi) -> None:
    loaded = load_modules(dev.url)
    # Browsers refuse to run a module served with any other type.
    for path, got in loaded.items():
        assert got.status_code == 200, path
        assert got.headers["content-type"] == "text/javascript; charset=utf-8", path
    # Every module in the package is reached from the entry script: none is
    # shipped dead, and the walk above checked them all.
    shipped = {"/static/" + path.relative_to(STATIC).as_posix() for path in STATIC.rglob("*.mjs")}
    assert shipped | {CLIENT_URL} == set(loaded)


def test_the_page_loads_the_js_client_of_clients_js(dev: LiveApi) -> None:
    """One file is both the npm package's and the page's: a checkout serves
    clients/js/tidings.mjs itself, and holds no copy a wheel's build makes."""
    got = httpx.get(f"{dev.url}{CLIENT_URL}")
    assert got.status_code == 200
    assert got.headers["content-type"] == "text/javascript; charset=utf-8"
    assert got.content == CHECKOUT_CLIENT.read_bytes()
    assert client_file() == CHECKOUT_CLIENT
    assert not PACKAGED_CLIENT.exists()
    # The app's modules reach the API through it only: no path of /v1 of their own.
    for path in STATIC.rglob("*.mjs"):
        assert "/v1/" not in path.read_text(), path.name


def test_no_module_names_a_feed_group() -> None:
    """The page takes group names from its config (the server's settings)."""
    names = "|".join(name for name in app_groups(Settings()).values() if name)
    # In a feed id ("timeline:…") or a path (/feeds/timeline/), or a constant
    # or default set to one (`HOME = "timeline"`); "user" is also a form
    # field's name, so a bare "user" is no group.
    named_in = re.compile(rf"[\"'`/]({names})[:/]|=\s*[\"'`]({names})[\"'`]")
    for path in STATIC.rglob("*.mjs"):
        named = named_in.findall(path.read_text())
        assert not named, f"{path.name} names the groups {named}"


def test_the_app_groups_follow_the_settings() -> None:
    groups = {
        "home": {},
        "me": {"public": True},
        "home_grouped": {"kind": "aggregated"},
        "a_grouped": {"kind": "aggregated"},
        "home_ranked": {"kind": "ranked"},
        "b_ranked": {"kind": "ranked"},
        # The defaults stay configured; retyped, they no longer play their part.
        "timeline_ranked": {"kind": "flat"},
        "notification": {"kind": "flat"},
        "timeline_aggregated": {"kind": "flat"},
    }
    settings = Settings(home_group="home", profile_group="me", groups=groups)  # type: ignore[arg-type]
    assert app_groups(settings) == {
        "home": "home",
        "profile": "me",
        # No group of the default name has the kind: the first of the kind by name.
        "aggregated": "a_grouped",
        # The default name (<home_group>_ranked) wins over the first by name.
        "ranked": "home_ranked",
        # No notification group: the app leaves the page out.
        "notifications": None,
    }
    assert app_groups(Settings())["aggregated"] == "timeline_aggregated"


def test_without_the_setting_there_is_no_web_app(tmp_path: Path) -> None:
    with live_api("sql", f"sqlite:///{tmp_path / 'n.db'}") as api:
        assert httpx.get(f"{api.url}/").status_code == 404
        assert httpx.get(f"{api.url}/static/js/main.mjs").status_code == 404
        assert httpx.post(f"{api.url}/app/session", json={"user": "a"}).status_code == 404


@pytest.mark.timeout(90)
def test_tidings_serve_app_dev_refuses_a_rebound_page_and_tokenless_sockets(
    tmp_path: Path,
) -> None:
    """The issue's requests against `tidings serve --app --dev` itself."""
    with tidings_serve(tmp_path, "--app") as served:
        url = f"{served.url}/app/session"
        rebound = {"host": "evil.example", "origin": "http://evil.example"}
        refused = httpx.post(
            url, content=b'{"user": "bob"}', headers={**rebound, "content-type": "text/plain"}
        )
        assert refused.status_code == 403, refused.text
        assert httpx.post(url, json={"user": "bob"}).status_code == 200
        # A WebSocket with no token: a 401 problem at the handshake, as for SSE.
        stream = served.url.replace("http://", "ws://") + "/v1/stream"
        with pytest.raises(InvalidStatus) as caught, ws_connect(stream):
            pass
        assert caught.value.response.status_code == 401
