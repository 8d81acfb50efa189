"""The web app's server side: its page, static files, avatars and sessions."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from http_server import SECRET, LiveApi, live_api
from tidings.http.auth import verify
from tidings.settings import Settings
from tidings.webapp.groups import app_groups
from tidings.webapp.routes import DEV_TOKEN_SECONDS, STATIC
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
        api.engine.create_user("alice", "Alice", {"name": "Alice </script> <!--<script> & A."})
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
    refused = httpx.post(f"{dev.url}/app/session", content=body)
    assert refused.status_code == status
    assert detail in refused.json()["detail"]


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
    for path in STATIC.rglob("*"):
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
    assert shipped == set(loaded)


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
