"""``tidings demo`` as a person starts it: a process of its own seeding a
small dataset, then the web app in Chromium on it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.webapp import demo_process
from playwright.sync_api import expect

from browser import chromium, shot
from http_server import free_port


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with demo_process(tmp_path, port, users=40, activities=400, fans=80, within_s=60):
        assert f"open {url}/ in a browser" in (tmp_path / "demo.log").read_text()
        yield url


@pytest.mark.timeout(180)
def test_the_demo_serves_the_web_app_on_its_dataset(demo: str) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.set_default_timeout(15_000)
        page.goto(f"{demo}/")
        people = page.locator("button.person")
        expect(people.first).to_be_visible()
        assert people.count() >= 5
        people.first.click()  # a follower of the most followed user
        expect(page.locator("ol.feed article.card").first).to_be_visible()
        expect(page.locator("#me-name")).to_contain_text("@")  # a handle, not an id
        page.get_by_role("link", name="Grouped").click()
        expect(page.locator("article.group").first).to_be_visible()
        page.get_by_role("link", name="Ranked").click()
        expect(page.locator("button.score").first).to_be_visible()
        page.get_by_role("link", name="Notifications").click()
        expect(page.get_by_role("button", name="Mark all read")).to_be_visible()
        page.get_by_role("link", name="Profile").click()
        expect(page.locator("[data-count=following] dd")).to_have_text(re.compile(r"^[0-9,]+$"))
        shot(page, "demo-profile")
