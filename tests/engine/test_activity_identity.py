"""Activities named as getstream names them (``foreign_id`` and ``time``, in
any feed) and changed by dotted paths: on the canonical store's two
databases, where the lookup by a millisecond's range of ids runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conftest import EngineFactory
from tidings import Tidings
from tidings.core.errors import ValidationError

WHEN = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _post(feeds: Tidings, feed: str, when: datetime, foreign_id: str, **extra: object) -> str:
    data = {"actor": "bob", "verb": "post", "object": "note:1", "time": when}
    added = feeds.add_activity(feed, {**data, "foreign_id": foreign_id, "extra": extra})
    return str(added.id)


@pytest.mark.parametrize("store", ["sql", "postgres"])
def test_find_by_foreign_id_and_time_in_any_feed(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    mine = _post(feeds, "user:bob", WHEN, "p1")
    theirs = _post(feeds, "user:carol", WHEN, "p1")
    _post(feeds, "user:dave", WHEN + timedelta(microseconds=1), "p1")  # same ms, not the time
    _post(feeds, "user:erin", WHEN, "p2")

    found = feeds.activities.find("p1", WHEN)
    assert sorted(a.id for a in found) == sorted([mine, theirs])
    assert feeds.activities.find("p1", WHEN + timedelta(milliseconds=1)) == []
    assert feeds.activities.find("p\x00", WHEN) == []
    with pytest.raises(ValidationError, match="UTC offset"):
        feeds.activities.find("p1", WHEN.replace(tzinfo=None))


@pytest.mark.parametrize("store", ["sql", "postgres"])
def test_update_by_dotted_paths(make_engine: EngineFactory) -> None:
    feeds = make_engine()
    product = {"name": "lamp", "price": {"eur": 20, "usd": 22}}
    activity_id = _post(feeds, "user:bob", WHEN, "p1", product=product, likes=0)

    updated = feeds.update_activity(
        activity_id,
        set={"product.price.eur": 18, "tags.first": "a"},
        unset=["product.name"],
        paths=True,
    )
    assert updated.extra == {
        "product": {"price": {"eur": 18, "usd": 22}},
        "likes": 0,
        "tags": {"first": "a"},
    }
    with pytest.raises(ValidationError, match="not an object"):
        feeds.update_activity(activity_id, set={"likes.count": 1}, paths=True)
    with pytest.raises(ValidationError, match="empty part"):
        feeds.update_activity(activity_id, unset=["product..price"], paths=True)
    assert feeds.get_activity(activity_id).extra == updated.extra
    # Without paths, a dot is part of the key, as before.
    assert feeds.update_activity(activity_id, set={"a.b": 1}).extra["a.b"] == 1
