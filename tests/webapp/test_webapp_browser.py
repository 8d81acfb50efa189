"""The web app in Chromium: two people in two browser contexts, live updates
between them, paging, follows, notifications and the firehose.

Each test has its own service (a fresh SQLite file, the default delivery
runner). Nothing here asserts a duration: the post-to-appearance latency is
measured by ``python -m bench --only webapp`` (bench/webapp.py), 50 posts each
way on the demo's dataset.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench import webapp as webapp_bench
from playwright.sync_api import Browser, BrowserContext, Page, expect

from browser import app_server, chromium, publish_posts, shot, sign_in
from http_server import LiveApi, live_api
from waiting import wait_delivered

#: How long a live update may take to show before a check fails (generous:
#: CI runs two test processes on two cores).
LIVE_MS = 10_000
expect.set_options(timeout=LIVE_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as made:
        yield made


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LiveApi]:
    with app_server(tmp_path) as served:
        yield served


@pytest.fixture
def contexts(browser: Browser) -> Iterator[list[BrowserContext]]:
    """Two browser contexts: two people, with cookies and storage of their own."""
    made = [browser.new_context(viewport={"width": 1000, "height": 800}) for _ in range(2)]
    for context in made:
        context.set_default_timeout(LIVE_MS)
    yield made
    for context in made:
        context.close()


def two(api: LiveApi, contexts: list[BrowserContext], first: str, second: str) -> list[Page]:
    pages = [context.new_page() for context in contexts]
    for page, user in zip(pages, (first, second), strict=True):
        sign_in(page, api.url, user)
    return pages


def post(page: Page, text: str) -> None:
    page.get_by_label("What's happening?").fill(text)
    page.get_by_role("button", name="Post", exact=True).click()


def card(page: Page, text: str) -> str:
    return f"article.card:has(p.text:text-is('{text}'))"


# -- live between two people -------------------------------------------------------


def test_a_post_appears_live_in_the_other_browser_without_reload(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "alice", ["golden hour at the harbour", "the market opens at 9"])
    publish_posts(api.engine, "bob", ["first coffee of the day"])
    [older, *_] = api.engine.read("timeline:bob", limit=5).results
    api.engine.reactions.put(older.id, "like", "bob")
    alice, bob = two(api, contexts, "alice", "bob")
    bob.evaluate("window.notReloaded = true")
    post(alice, "hello from alice")
    expect(alice.locator(card(alice, "hello from alice"))).to_have_count(1)
    arrived = bob.locator(card(bob, "hello from alice"))
    expect(arrived).to_have_count(1)
    expect(arrived.locator("a.name")).to_have_text("Alice Abara")
    # At the top of the page it goes straight in, and the banner says so.
    expect(bob.get_by_role("button", name="1 new activity")).to_be_visible()
    assert bob.evaluate("window.notReloaded") is True
    # The stream also carried it to alice's own timeline: shown once, not twice.
    expect(alice.locator(card(alice, "hello from alice"))).to_have_count(1)
    shot(bob, "home")


def test_new_activities_wait_behind_a_banner_once_scrolled(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "bob", [f"older {n}" for n in range(30)])
    alice, bob = two(api, contexts, "alice", "bob")
    bob.mouse.wheel(0, 1500)
    bob.wait_for_function("() => window.scrollY > 200")
    for n in range(3):
        post(alice, f"while you read {n}")
        expect(alice.locator(card(alice, f"while you read {n}"))).to_have_count(1)
    banner = bob.get_by_role("button", name="3 new activities")
    expect(banner).to_be_visible()
    expect(bob.locator(card(bob, "while you read 0"))).to_have_count(0)
    banner.click()
    firsts = bob.locator("ol.feed > li article p.text").all_inner_texts()[:3]
    assert firsts == ["while you read 2", "while you read 1", "while you read 0"]
    expect(banner).to_be_hidden()


def test_a_like_changes_the_count_in_both_browsers(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    alice, bob = two(api, contexts, "alice", "bob")
    post(alice, "like me")
    on_alice = alice.locator(card(alice, "like me"))
    on_bob = bob.locator(card(bob, "like me"))
    expect(on_bob).to_have_count(1)
    on_bob.locator("button.like").click()
    expect(on_bob.locator("button.like .count")).to_have_text("1")
    expect(on_bob.locator("button.like")).to_have_attribute("aria-pressed", "true")
    expect(on_alice.locator("button.like .count")).to_have_text("1")
    expect(on_alice.locator("button.like")).to_have_attribute("aria-pressed", "false")
    on_alice.locator("button.like").click()
    expect(on_bob.locator("button.like .count")).to_have_text("2")
    expect(on_alice.locator("button.like .count")).to_have_text("2")
    on_bob.locator("button.like").click()  # unlike
    expect(on_bob.locator("button.like")).to_have_attribute("aria-pressed", "false")
    expect(on_alice.locator("button.like .count")).to_have_text("1")
    expect(on_bob.locator("button.like .count")).to_have_text("1")
    # What the browsers show is what the API holds.
    found = api.engine.reactions.counts([on_alice.get_attribute("data-id") or ""])
    assert next(iter(found.values())) == {"like": 1}


def test_a_comment_shows_in_both_browsers(api: LiveApi, contexts: list[BrowserContext]) -> None:
    alice, bob = two(api, contexts, "alice", "bob")
    post(alice, "say something")
    on_alice = alice.locator(card(alice, "say something"))
    on_bob = bob.locator(card(bob, "say something"))
    on_alice.locator("button.comment-toggle").click()  # alice has the comments open
    expect(on_alice.locator(".comment-list")).to_contain_text("No comments yet.")
    on_bob.locator("button.comment-toggle").click()
    expect(on_bob.locator("button.comment-toggle")).to_have_attribute("aria-expanded", "true")
    on_bob.get_by_label("Your comment").fill("nice one")
    on_bob.get_by_role("button", name="Reply").click()
    expect(on_bob.locator(".comment-list li")).to_contain_text(["nice one"])
    expect(on_bob.locator("button.comment-toggle .count")).to_have_text("1")
    expect(on_alice.locator("button.comment-toggle .count")).to_have_text("1")
    expect(on_alice.locator(".comment-list")).to_contain_text("nice one")
    expect(on_alice.locator(".comment-list")).to_contain_text("Bob Berg")


def test_the_notification_badge_rises_live_and_clears_on_mark_read(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    alice, bob = two(api, contexts, "alice", "bob")
    badge = alice.locator("#badge")
    expect(badge).to_be_hidden()
    post(alice, "notice me")
    on_bob = bob.locator(card(bob, "notice me"))
    on_bob.locator("button.like").click()
    expect(badge).to_be_visible()
    expect(badge).to_have_text("1 unseen")
    on_bob.locator("button.comment-toggle").click()
    on_bob.get_by_label("Your comment").fill("noticed")
    on_bob.get_by_role("button", name="Reply").click()
    expect(badge).to_have_text("2 unseen")
    alice.get_by_role("link", name="Notifications").click()
    unread = alice.locator("article.group.unread")
    expect(unread).to_have_count(2)
    expect(alice.locator("article.group").first).to_contain_text(
        "Bob Berg commented on your status"
    )
    expect(alice.locator("article.group").nth(1)).to_contain_text("Bob Berg liked your status")
    shot(alice, "notifications")
    alice.get_by_role("button", name="Mark all read").click()
    expect(badge).to_be_hidden()
    expect(unread).to_have_count(0)
    assert api.engine.notification_counts("notification:alice") == (0, 0)
    # bob's notifications are his: alice is shown why she cannot see them.
    alice.goto(f"{api.url}/#/notifications/bob")
    message = alice.get_by_role("alert")
    expect(message).to_contain_text("You can't see bob's notifications")
    expect(message).to_contain_text("403")


# -- reading --------------------------------------------------------------------------


def test_infinite_scroll_loads_the_next_page_with_no_duplicate(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "bob", [f"post {n:02d}" for n in range(45)])
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    cards = page.locator("ol.feed > li > article.card")
    # The next page is fetched once the end of the list comes within 300 px
    # of the view, which can happen before the first page is laid out on a
    # loaded machine: a page may be there before the scroll that would ask.
    expect(cards.nth(19)).to_be_attached()
    page.mouse.wheel(0, 20_000)
    expect(cards.nth(39)).to_be_attached()
    page.mouse.wheel(0, 20_000)
    expect(cards).to_have_count(45)
    expect(page.get_by_role("status").filter(has_text="caught up")).to_be_visible()
    ids = [c.get_attribute("data-id") for c in cards.all()]
    assert len(set(ids)) == 45
    texts = page.locator("ol.feed p.text").all_inner_texts()
    assert texts == [f"post {n:02d}" for n in reversed(range(45))]


def test_the_aggregated_timeline_says_who_did_what(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    engine = api.engine
    photos = [f"photo:{n}" for n in range(3)]
    engine.activities.publish_many(
        "user:bob", [{"actor": "bob", "verb": "like", "object": photo} for photo in photos]
    )
    wait_delivered(engine)
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    page.get_by_role("link", name="Grouped").click()
    aggregate = page.locator("article.group").first
    expect(aggregate).to_contain_text("Bob Berg liked 3 photos")
    shot(page, "grouped")
    # Live: bob's next like joins the aggregate, which says so without a reload.
    engine.activities.publish("user:bob", {"actor": "bob", "verb": "like", "object": "photo:9"})
    expect(aggregate).to_contain_text("Bob Berg liked 4 photos")


def test_the_ranked_timeline_explains_a_score_on_hover_and_focus(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "bob", ["first", "second", "third"])
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    page.get_by_role("link", name="Ranked").click()
    score = page.locator("article.card button.score").first
    expect(score).to_be_visible()
    tip = page.locator(".tip").first
    expect(tip).to_be_hidden()
    score.hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("score")
    expect(tip).to_contain_text("age_hours")
    shot(page, "ranked")
    page.mouse.move(0, 0)
    expect(tip).to_be_hidden()
    score.focus()  # the keyboard reaches it too
    expect(tip).to_be_visible()
    tip_id = tip.get_attribute("id")
    assert score.get_attribute("aria-describedby") == tip_id


def test_following_from_a_profile_changes_the_counts(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "carol", ["carol was here"])
    page = contexts[0].new_page()
    sign_in(page, api.url, "dave")
    expect(page.locator(card(page, "carol was here"))).to_have_count(0)
    page.goto(f"{api.url}/#/u/carol")
    followers = page.locator("[data-count=followers] dd")
    expect(followers).to_have_text("0")  # carol's own timeline follows her: not counted
    page.get_by_role("button", name="Follow", exact=True).click()
    expect(followers).to_have_text("1")
    expect(page.get_by_role("button", name="Unfollow")).to_be_visible()
    shot(page, "profile")
    page.goto(f"{api.url}/#/u/dave")
    expect(page.locator("[data-count=following] dd")).to_have_text("1")
    page.get_by_role("link", name="Home").click()
    expect(page.locator(card(page, "carol was here"))).to_have_count(1)  # history copied
    page.goto(f"{api.url}/#/u/carol")
    page.get_by_role("button", name="Unfollow").click()
    expect(followers).to_have_text("0")
    page.goto(f"{api.url}/#/u/dave")
    expect(page.locator("[data-count=following] dd")).to_have_text("0")


def test_muting_from_a_profile_hides_their_activities(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "bob", ["bob talks"])
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    expect(page.locator(card(page, "bob talks"))).to_have_count(1)
    page.goto(f"{api.url}/#/u/bob")
    page.get_by_role("button", name="Mute", exact=True).click()
    expect(page.get_by_role("button", name="Unmute")).to_be_visible()
    page.get_by_role("link", name="Home").click()
    expect(page.locator(".feed-wrap[data-live='connected']")).to_have_count(1)
    expect(page.get_by_role("status").filter(has_text="Nothing here yet")).to_be_visible()
    expect(page.locator(card(page, "bob talks"))).to_have_count(0)
    assert [m.target for m in api.engine.rules.mutes("alice")] == ["bob"]


def test_the_firehose_page_shows_what_matches_its_track_live(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    alice, bob = two(api, contexts, "alice", "bob")
    alice.get_by_role("link", name="Firehose").click()
    alice.get_by_label("Track").fill("harbour")
    alice.get_by_role("button", name="Listen").click()
    alice.wait_for_selector("ol.feed[data-live='connected']", state="attached")
    post(bob, "the kitchen is busy")
    post(bob, "a misty harbour")
    shown = alice.locator("ol.feed article.card")
    expect(shown).to_have_count(1)
    expect(shown).to_contain_text("a misty harbour")
    expect(shown.locator("a.name")).to_have_text("Bob Berg")
    shot(alice, "firehose")
    # The kitchen post was published before a later match: it would be here by now.
    post(bob, "a harbour at dusk")
    expect(shown).to_have_count(2)
    expect(shown.filter(has_text="kitchen")).to_have_count(0)


# -- signing in, keyboard --------------------------------------------------------------


def test_the_development_sign_in_offers_people_and_mints_a_token(
    api: LiveApi, browser: Browser
) -> None:
    page = browser.new_page()
    page.goto(f"{api.url}/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("button.person")).to_have_count(4)
    shot(page, "sign-in")
    page.get_by_label("Or any user id").fill("not a valid id!")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("a user id must be 1-255")
    page.get_by_label("Or any user id").fill("carol")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#me-name")).to_contain_text("@carol")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.close()


def test_production_mode_signs_in_with_a_token_only(tmp_path: Path, browser: Browser) -> None:
    with app_server(tmp_path, dev_sign_in=False) as api:
        refused = httpx.post(f"{api.url}/app/session", json={"user": "alice"})
        assert refused.status_code == 403
        assert "development" in refused.json()["detail"]
        page = browser.new_page()
        page.goto(f"{api.url}/")
        expect(page.locator("button.person")).to_have_count(0)
        page.get_by_label("Token").fill("not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("token is invalid")
        page.get_by_label("Token").fill(api.token("bob"))
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#me-name")).to_contain_text("@bob")
        # A user token minted without the firehose scope: the page says why not.
        page.get_by_role("link", name="Firehose").click()
        page.get_by_role("button", name="Listen").click()
        expect(page.get_by_role("alert")).to_contain_text("firehose")
        page.close()


def test_the_keyboard_moves_between_cards_and_reaches_every_action(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    publish_posts(api.engine, "bob", ["one", "two"])
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    page.locator("body").press("j")
    focused = page.locator("article.card:focus")
    expect(focused).to_contain_text("two")
    page.keyboard.press("j")
    expect(focused).to_contain_text("one")
    page.keyboard.press("k")
    expect(focused).to_contain_text("two")
    page.keyboard.press("Tab")  # into the card: its first link, then its buttons
    names = []
    for _ in range(4):
        names.append(page.evaluate("document.activeElement.textContent.trim()"))
        page.keyboard.press("Tab")
    assert names[0] == "Bob Berg"
    assert any("Like" in n for n in names)
    assert any(n.startswith("Comment") for n in names)
    # Every image has an alt text (avatars are decorative: empty), every
    # input a label.
    assert page.evaluate("[...document.images].every((i) => i.hasAttribute('alt'))")
    assert page.evaluate(
        "[...document.querySelectorAll('input, textarea')].every((i) => i.labels.length > 0)"
    )


def test_a_new_users_own_posts_stay_in_their_home_timeline(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    page = contexts[0].new_page()
    page.goto(f"{api.url}/")
    page.get_by_label("Or any user id").fill("zed")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector(".feed-wrap[data-live='connected']", state="attached")
    post(page, "my first post")
    expect(page.locator(card(page, "my first post"))).to_have_count(1)
    page.reload()  # from the server now, not the page's memory
    expect(page.locator(card(page, "my first post"))).to_have_count(1)
    # The self-follow the app made counts on neither side.
    assert api.engine.users.counts("zed") == {"followers": 0, "following": 0, "activities": 1}


def test_an_edit_keeps_the_counts_and_the_liked_state(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    alice, bob = two(api, contexts, "alice", "bob")
    post(alice, "before the edit")
    on_bob = bob.locator("article.card").first
    expect(on_bob).to_contain_text("before the edit")
    on_bob.locator("button.like").click()
    expect(on_bob.locator("button.like .count")).to_have_text("1")
    activity_id = on_bob.get_attribute("data-id") or ""
    api.engine.update_activity(activity_id, set={"text": "after the edit"})
    expect(on_bob).to_contain_text("after the edit")
    expect(on_bob.locator("button.like .count")).to_have_text("1")
    expect(on_bob.locator("button.like")).to_have_attribute("aria-pressed", "true")


def test_the_skip_link_and_a_malformed_link_keep_the_page_usable(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    page = contexts[0].new_page()
    sign_in(page, api.url, "alice")
    page.goto(f"{api.url}/#/u/bob")
    expect(page.get_by_role("heading", name="Bob Berg")).to_be_visible()
    page.get_by_role("link", name="Skip to content").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    assert page.url.endswith("#/u/bob")
    page.goto(f"{api.url}/#/u/%E0%A4%A")
    expect(page.get_by_role("heading", name="Home")).to_be_visible()


# A deployment that names its own groups. The defaults stay configured (they
# are merged in), so "notification" is retyped to leave "alerts" the only
# notification group; the app must use these names, not the defaults.
RENAMED_GROUPS = {
    "home": {"addressable": True},
    "me": {"public": True},
    "home_aggregated": {"kind": "aggregated", "addressable": True},
    "home_ranked": {"kind": "ranked", "addressable": True},
    "alerts": {"kind": "notification"},
    "notification": {"kind": "flat"},
}


def test_the_app_reads_and_writes_the_groups_the_server_names(
    tmp_path: Path, browser: Browser
) -> None:
    with live_api(
        "sql",
        f"sqlite:///{tmp_path / 'renamed.db'}",
        task_runner="thread",
        web_app=True,
        web_app_dev_sign_in=True,
        web_app_users="alice,bob",
        sse_heartbeat_seconds=1.0,
        home_group="home",
        profile_group="me",
        groups=RENAMED_GROUPS,
    ) as api:
        api.engine.users.create("alice", "alice", {"name": "Alice Abara"})
        api.engine.users.create("bob", "bob", {"name": "Bob Berg"})
        contexts = [browser.new_context() for _ in range(2)]
        try:
            for context in contexts:
                context.set_default_timeout(LIVE_MS)
            alice, bob = two(api, contexts, "alice", "bob")
            bob.goto(f"{api.url}/#/u/alice")
            bob.get_by_role("button", name="Follow", exact=True).click()
            expect(bob.get_by_role("button", name="Unfollow")).to_be_visible()
            bob.get_by_role("link", name="Home").click()
            bob.wait_for_selector(".feed-wrap[data-live='connected']")
            post(alice, "named groups")
            on_bob = bob.locator(card(bob, "named groups"))
            expect(on_bob).to_have_count(1)
            on_bob.locator("button.like").click()
            expect(alice.locator("#badge-count")).to_have_text("1")
            bob.get_by_role("link", name="Grouped").click()
            expect(bob.locator("article.card.group")).to_have_count(1)
            bob.get_by_role("link", name="Ranked").click()
            expect(bob.locator(card(bob, "named groups"))).to_have_count(1)
        finally:
            for context in contexts:
                context.close()
        # Where it went, as the API holds it: the server's groups, not the defaults.
        texts = [a.extra.get("text") for a in api.engine.read("me:alice", limit=5).results]
        assert texts == ["named groups"]
        assert [a.extra.get("text") for a in api.engine.read("home:bob", limit=5).results] == texts
        assert len(api.engine.read_aggregates("alerts:alice", limit=5).results) == 1


def test_a_page_whose_group_the_server_lacks_is_left_out(tmp_path: Path, browser: Browser) -> None:
    # The default ranked group retyped, and no other: no ranked feeds here.
    with live_api(
        "sql",
        f"sqlite:///{tmp_path / 'unranked.db'}",
        web_app=True,
        web_app_dev_sign_in=True,
        web_app_users="alice",
        groups={"timeline_ranked": {"addressable": True}},
    ) as api:
        api.engine.users.create("alice", "alice", {"name": "Alice Abara"})
        context = browser.new_context()
        try:
            context.set_default_timeout(LIVE_MS)
            page = context.new_page()
            sign_in(page, api.url, "alice")
            expect(page.get_by_role("link", name="Grouped")).to_be_visible()
            expect(page.get_by_role("link", name="Ranked")).to_be_hidden()
            page.goto(f"{api.url}/#/ranked")
            expect(page).to_have_url(f"{api.url}/#/home")
            expect(page.get_by_role("heading", name="Home")).to_be_visible()
        finally:
            context.close()
        # Signing in followed the user's own posts from the timelines there are.
        following = api.engine.following("timeline_aggregated:alice").results
        assert [f.source for f in following] == ["user:alice"]
        assert not api.engine.following("timeline_ranked:alice").results


# -- post to appearance, one after another ----------------------------------------------------


def test_each_of_ten_posts_in_a_row_appears_in_the_other_browser(
    api: LiveApi, contexts: list[BrowserContext]
) -> None:
    """Alice presses Post ten times without a pause; each post shows in bob's
    browser, live (the bench times this: bench/webapp.py)."""
    alice, bob = two(api, contexts, "alice", "bob")
    latencies = webapp_bench.latencies(alice, bob, "in a row", 10, pause_s=0)
    assert len(latencies) == 10
    assert all(ms > 0 for ms in latencies)


def test_the_browser_is_debians_chromium(browser: Browser) -> None:
    """Playwright's own download is not reachable here: the suite drives /usr/bin/chromium."""
    version = subprocess.run(
        ["/usr/bin/chromium", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert browser.version.split(".")[0] in version
