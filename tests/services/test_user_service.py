"""Users, handles, objects, counts and enrichment through the engine."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from conftest import EngineFactory
from tidings import Tidings, ValidationError
from tidings.canonical.schema import follows
from tidings.core.users import (
    MAX_PROFILE_BYTES,
    HandleTaken,
    NotObjectOwner,
    ObjectNotFound,
    UserNotFound,
)

pytestmark = pytest.mark.parametrize("store", ["sql", "postgres"], indirect=True)

#: (a handle held, a second claim, whether the second is the same handle)
HANDLES = [
    ("Alice", "alice", True),
    ("Alice", "ALICE", True),
    ("Alice", "\uff41\uff4c\uff49\uff43\uff45", True),  # full-width
    ("stra\u00dfe", "STRASSE", True),  # ß case-folds to ss
    ("\u01c4ungla", "\u01c6ungla", True),  # Ǆ and ǆ: one letter, case-folded
    ("caf\u00e9", "cafe\u0301", True),  # composed and decomposed é
    ("\u2460x", "1x", True),  # circled digit one: NFKC is 1
    ("alice", "alice2", False),
    ("alice", "al-ice", False),
    ("Alice", "AIice", True),  # a capital i reads as l
    ("alice", "\u0430\u04cf\u0456\u0441\u0435", True),  # all Cyrillic, looking like alice
    ("\u0430\u04cf\u0456\u0441\u0435", "ALICE", True),  # ...and the other way round
]


@pytest.mark.parametrize(
    ("held", "claim", "same"), HANDLES, ids=[f"{a}|{b}" for a, b, _ in HANDLES]
)
def test_handles_are_unique_after_nfkc_casefold_and_skeleton(
    make_engine: EngineFactory, held: str, claim: str, same: bool
) -> None:
    engine = make_engine()
    engine.users.create("u1", held)
    if same:
        with pytest.raises(HandleTaken, match="taken"):
            engine.users.create("u2", claim)
        assert engine.users.by_handle(claim).id == "u1"
    else:
        assert engine.users.create("u2", claim).handle == claim
        assert engine.users.by_handle(claim).id == "u2"


@pytest.mark.parametrize(
    "handle",
    [
        "",
        "a b",
        "a\tb",
        "-alice",
        ".alice",
        "_alice",
        "alice.",
        "alice-",
        "__",
        "x" * 65,
        "al!ce",
        "\u0000a",
        "😀",
        "\u0430lice",  # a Cyrillic a among Latin letters
        "supp\u043ert",  # a Cyrillic o
    ],
)
def test_bad_handles_are_refused(make_engine: EngineFactory, handle: str) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError) as caught:
        engine.users.create("u1", handle)
    assert caught.value.field == "handle"
    with pytest.raises(UserNotFound):
        engine.users.get("u1")


def test_reserved_handles_and_ids(make_engine: EngineFactory) -> None:
    engine = make_engine(reserved_handles=["admin", "Mod", "support"])
    # ADMlN with a small L; then admin and support all in Cyrillic look-alikes.
    for handle in ("admin", "ADMIN", "mod", "ADMlN", "\u0430\u0501\u043c\u0456\u043f"):
        with pytest.raises(HandleTaken, match=f"handle {handle!r} is reserved"):
            engine.users.create("u1", handle)
        with pytest.raises(UserNotFound):
            engine.users.get("u1")
    for handle in ("\u0430dmin", "supp\u043ert"):  # one Cyrillic letter among Latin ones
        with pytest.raises(ValidationError, match="mixes the scripts Cyrillic") as caught:
            engine.users.create("u1", handle)
        assert caught.value.field == "handle"
    with pytest.raises(ValidationError, match="feeds"):
        engine.users.create("a b", "ab")
    engine.users.create("u1", "fine")
    with pytest.raises(HandleTaken, match="exists"):
        engine.users.create("u1", "other")


def test_profiles_are_size_limited(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(ValidationError, match="10,240") as caught:
        engine.users.create("u1", "u1", {"bio": "x" * MAX_PROFILE_BYTES})
    assert caught.value.field == "profile"
    user = engine.users.create("u1", "u1", {"bio": "hi"})
    with pytest.raises(ValidationError, match="JSON object"):
        engine.users.update("u1", profile=["x"])  # type: ignore[arg-type]
    assert engine.users.get("u1").profile == user.profile


def test_a_rename_keeps_the_old_handle_for_the_keep_time(make_engine: EngineFactory) -> None:
    engine = make_engine(handle_keep_seconds=3600)
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    engine.users.create("u1", "Alice")
    renamed = engine.users.update("u1", handle="alicia", profile={"name": "Alicia"})
    assert (renamed.handle, renamed.profile) == ("alicia", {"name": "Alicia"})
    assert engine.users.by_handle("ALICE").id == "u1"  # still resolves
    with pytest.raises(HandleTaken):
        engine.users.create("u2", "alice")
    engine.users.update("u1", handle="Alice")  # one may take one's old handle back
    engine.users.update("u1", handle="alicia")
    engine.clock.now = lambda: now + timedelta(seconds=3601)
    with pytest.raises(UserNotFound):
        engine.users.by_handle("alice")
    assert engine.users.create("u2", "alice").id == "u2"
    assert engine.users.by_handle("Alicia").id == "u1"


def test_sixteen_claimants_of_one_handle_one_wins(make_engine: EngineFactory) -> None:
    engine = make_engine()
    start = threading.Barrier(16)
    won: list[str] = []
    lost: list[str] = []
    errors: list[BaseException] = []

    def claim(n: int) -> None:
        start.wait()
        try:
            engine.users.create(f"u{n}", "Prize" if n % 2 else "PRIZE")
            won.append(f"u{n}")
        except HandleTaken:
            lost.append(f"u{n}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(won) == 1
    assert len(lost) == 15
    assert engine.users.by_handle("prize").id == won[0]


def test_counts_are_exact_under_concurrent_follows_and_unfollows(
    make_engine: EngineFactory,
) -> None:
    engine = make_engine()
    engine.users.create("star", "star")
    errors: list[BaseException] = []

    def churn(n: int) -> None:
        rng = random.Random(n)
        try:
            for _ in range(40):
                fan = f"timeline:f{rng.randrange(12)}"
                if rng.random() < 0.6:
                    engine.follow(fan, "user:star", copy_limit=0)
                else:
                    engine.unfollow(fan, "user:star")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with engine.db.read() as conn:
        held = conn.execute(
            select(func.count()).select_from(follows).where(follows.c.source == "user:star")
        ).scalar_one()
    assert engine.users.counts("star")["followers"] == held
    assert engine.users.feed_stats("user:star").followers == held


def test_user_counts(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.users.create("bob", "bob")
    for source in ("user:a", "user:b"):
        engine.follow("timeline:bob", source)
    engine.follow("timeline:x", "user:bob")
    made = [
        engine.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": f"n:{i}"})
        for i in range(3)
    ]
    engine.add_activity(
        "user:bob", {"actor": "bob", "verb": "post", "object": "n:0", "foreign_id": "f"}
    )
    engine.add_activity(
        "user:bob", {"actor": "bob", "verb": "post", "object": "n:0", "foreign_id": "f"}
    )
    engine.remove_activity("user:bob", made[0].id)
    assert engine.users.counts("bob") == {"followers": 1, "following": 2, "activities": 3}
    stats = engine.users.feed_stats("timeline:bob")
    assert (stats.followers, stats.following, stats.activities) == (0, 2, 0)
    engine.add_activities("user:bob", [{"actor": "bob", "verb": "post", "object": "n:9"}] * 2)
    assert engine.users.counts("bob")["activities"] == 5


def test_user_counts_count_people_not_feeds(make_engine: EngineFactory) -> None:
    """Followers are people: one each however many of their feeds follow (home
    feeds only), and never the user themselves (a self-follow puts their
    posts in their own timeline; it counts on neither side)."""
    engine = make_engine(groups={"timelinex": {}})  # a group named like the home one, longer
    engine.users.create("bob", "bob")
    groups = ("timeline", "timeline_aggregated", "timeline_ranked")
    pairs = [(f"{g}:{u}", "user:bob") for g in groups for u in ("ann", "cy", "bob")]
    pairs += [(f"{g}:bob", "user:ann") for g in groups]
    pairs += [("notification:dee", "user:bob"), ("timelinex:eve", "user:bob")]
    engine.follow_many(pairs, copy_limit=0)
    assert engine.users.counts("bob") == {"followers": 2, "following": 1, "activities": 0}
    assert engine.users.feed_stats("user:bob").followers == 11  # the feed's own count: every feed
    engine.unfollow("timeline:cy", "user:bob")
    assert engine.users.counts("bob")["followers"] == 1


def test_objects(make_engine: EngineFactory) -> None:
    engine = make_engine()
    stored, created = engine.objects.put("photo", "17", {"url": "/p/17.jpg"})
    assert created
    again, created = engine.objects.put("photo", "17", {"url": "/p/17b.jpg"})
    assert not created
    assert engine.objects.get("photo", "17").data == {"url": "/p/17b.jpg"}
    assert again.created_us == stored.created_us
    engine.objects.delete("photo", "17")
    with pytest.raises(ObjectNotFound):
        engine.objects.get("photo", "17")
    with pytest.raises(ObjectNotFound):
        engine.objects.delete("photo", "17")
    for kind, oid in (("Photo", "1"), ("photo", "a b"), ("photo", "")):
        with pytest.raises(ValidationError):
            engine.objects.put(kind, oid, {})
    with pytest.raises(ValidationError, match="10,240"):
        engine.objects.put("photo", "1", {"x": "y" * MAX_PROFILE_BYTES})


def test_a_user_changes_only_the_objects_it_created(make_engine: EngineFactory) -> None:
    engine = make_engine()
    made, _ = engine.objects.put("photo", "b1", {"url": "b.jpg"}, user="bob")
    assert made.owner == "bob"
    with pytest.raises(NotObjectOwner, match="'bob'"):
        engine.objects.put("photo", "b1", {"url": "evil.jpg"}, user="alice")
    with pytest.raises(NotObjectOwner):
        engine.objects.delete("photo", "b1", user="alice")
    assert engine.objects.get("photo", "b1").data == {"url": "b.jpg"}  # nothing written
    replaced, _ = engine.objects.put("photo", "b1", {"url": "s.jpg"})  # the application
    assert replaced.owner == "bob"
    engine.objects.put("photo", "s1", {"url": "s.jpg"})
    with pytest.raises(NotObjectOwner, match="application's"):
        engine.objects.put("photo", "s1", {}, user="alice")
    engine.objects.delete("photo", "b1", user="bob")
    with pytest.raises(NotObjectOwner):  # a tombstone stays its creator's
        engine.objects.put("photo", "b1", {}, user="alice")


def test_enrichment_with_tombstones_and_fields(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.users.create("bob", "Bob", {"avatar": "b.png", "bio": "hi"})
    engine.users.create("gone", "Gone")
    engine.objects.put("photo", "1", {"url": "1.jpg", "w": 10})
    engine.objects.put("photo", "2", {"url": "2.jpg"})
    engine.follow("timeline:alice", "user:bob")
    engine.follow("timeline:alice", "user:gone")

    def post(second: int, actor: str, obj: str, target: str | None = None) -> None:
        # Times a second apart: ids within one millisecond sort in any order.
        data: dict[str, Any] = {
            "actor": actor,
            "verb": "post",
            "object": obj,
            "target": target,
            "time": f"2026-01-01T00:00:0{second}Z",
        }
        engine.add_activity(f"user:{actor}", data)

    post(1, "bob", "photo:1", "album:9")
    post(2, "gone", "photo:2")
    post(3, "bob", "note-without-type")
    engine.users.delete("gone")
    engine.objects.delete("photo", "2")
    page = engine.read("timeline:alice", enrich=True, fields="avatar,url")
    assert page.extras is not None
    note, gone, photo = page.extras
    assert photo["actor"] == {"id": "bob", "handle": "Bob", "profile": {"avatar": "b.png"}}
    assert photo["object"] == {"type": "photo", "id": "1", "data": {"url": "1.jpg"}}
    assert photo["target"] == "album:9"  # never stored: stays the reference
    assert gone["actor"] == {"id": "gone", "deleted": True}
    assert gone["object"] == {"type": "photo", "id": "2", "deleted": True}
    assert note["object"] == "note-without-type"
    # The activities themselves are as stored.
    assert [a.actor for a in page.results] == ["bob", "gone", "bob"]
    raw = engine.reads.json("timeline:alice", enrich=True).results
    assert b'"handle":"Bob"' in raw[0]
    with pytest.raises(UserNotFound):
        engine.users.get("gone")


def test_a_deleted_user_id_is_kept_then_starts_clean(make_engine: EngineFactory) -> None:
    """A deleted user's id is refused for the keep time; created again after
    it, the new user is not the author of what the deleted one published,
    nor counts it."""
    engine: Tidings = make_engine(handle_keep_seconds=3600)
    now = datetime.now(UTC)
    engine.clock.now = lambda: now
    engine.users.create("u1", "one", {"name": "First"})
    engine.follow("timeline:bob", "user:u1")
    old = engine.add_activity("user:u1", {"actor": "u1", "verb": "post", "object": "n:1"})
    engine.users.delete("u1")
    with pytest.raises(UserNotFound):
        engine.users.delete("u1")
    engine.clock.now = lambda: now + timedelta(seconds=3599)
    with pytest.raises(HandleTaken, match="'u1' was deleted; its id is kept") as caught:
        engine.users.create("u1", "other")
    assert caught.value.field == "id"
    with pytest.raises(UserNotFound):
        engine.users.get("u1")
    assert engine.users.create("u2", "other").id == "u2"  # the handle was not claimed

    engine.clock.now = lambda: now + timedelta(seconds=3601)
    assert engine.users.create("u1", "one", {"name": "Second"}).handle == "one"
    assert engine.users.get("u1").profile == {"name": "Second"}
    assert engine.users.counts("u1")["activities"] == 0
    page = engine.read("timeline:bob", enrich=True)
    assert page.extras is not None
    assert page.extras[0]["actor"] == {"id": "u1", "deleted": True}  # the first u1's
    new = engine.add_activity("user:u1", {"actor": "u1", "verb": "post", "object": "n:2"})
    assert engine.users.counts("u1")["activities"] == 1
    page = engine.read("timeline:bob", enrich=True)
    assert [a.id for a in page.results] == [new.id, old.id]
    assert page.extras is not None
    assert page.extras[0]["actor"]["profile"] == {"name": "Second"}
    assert page.extras[1]["actor"] == {"id": "u1", "deleted": True}
