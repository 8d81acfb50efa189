"""The web app in a real browser: Debian's Chromium driven by Playwright.

Playwright's own browser download is not reachable here, so the browser is
the system's (``scripts/install-system-deps.sh`` installs it, as it installs
redis-server). Each test gets its own service over a fresh SQLite file, with
the web app, its development sign-in and the default delivery runner.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, sync_playwright

from http_server import LiveApi, live_api
from tidings import Tidings
from waiting import wait_delivered

CHROMIUM = "/usr/bin/chromium"
#: Where the tests leave screenshots of the main pages (the README shows one).
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"

#: The people every browser test starts with: id, handle, name.
PEOPLE = (
    ("alice", "alice", "Alice Abara"),
    ("bob", "bob", "Bob Berg"),
    ("carol", "carol", "Carol Castro"),
    ("dave", "dave", "Dave Dubois"),
)


@contextmanager
def chromium() -> Iterator[Browser]:
    path = shutil.which("chromium") or CHROMIUM
    if not Path(path).exists():
        raise RuntimeError(
            f"no Chromium at {CHROMIUM}: run scripts/install-system-deps.sh (make test does)"
        )
    with sync_playwright() as playwright:
        # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def app_server(tmp_path: Path, *, dev_sign_in: bool = True) -> Iterator[LiveApi]:
    """The service with the web app, people created, and follows: alice and bob
    follow each other (timeline, aggregated and ranked), everyone follows
    themselves, nobody follows carol or dave."""
    with live_api(
        "sql",
        f"sqlite:///{tmp_path / 'app.db'}",
        task_runner="thread",
        web_app=True,
        web_app_dev_sign_in=dev_sign_in,
        web_app_users=",".join(p[0] for p in PEOPLE),
        sse_heartbeat_seconds=1.0,
    ) as api:
        engine = api.engine
        for user_id, handle, name in PEOPLE:
            engine.users.create(user_id, handle, {"name": name})
        pairs = [(f"{g}:{u}", f"user:{u}") for u, _, _ in PEOPLE for g in HOME_GROUPS]
        pairs += [(f"{g}:alice", "user:bob") for g in HOME_GROUPS]
        pairs += [(f"{g}:bob", "user:alice") for g in HOME_GROUPS]
        engine.follow_many(pairs, copy_limit=0)
        yield api


HOME_GROUPS = ("timeline", "timeline_aggregated", "timeline_ranked")


def publish_posts(engine: Tidings, user: str, texts: list[str], *, kind: str = "status") -> None:
    """Posts by ``user`` a minute apart, the last one newest; then delivered."""
    now = datetime.now(UTC)
    items: list[dict[str, Any]] = [
        {
            "actor": user,
            "verb": "post",
            "object": f"{kind}:{user}-{n}",
            "time": now - timedelta(minutes=len(texts) - n),
            "extra": {"text": text},
        }
        for n, text in enumerate(texts)
    ]
    engine.activities.publish_many(f"user:{user}", items)
    wait_delivered(engine)


def sign_in(page: Page, url: str, user: str) -> None:
    """Sign in by picking ``user`` on the development sign-in page; waits for
    the home timeline and its live stream to be open."""
    page.goto(f"{url}/")
    page.get_by_role("button", name=f"@{user}").click()
    page.wait_for_selector(".feed-wrap[data-live='connected']")


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
