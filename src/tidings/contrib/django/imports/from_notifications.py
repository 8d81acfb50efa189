"""django-notifications-hq's ``Notification`` table into tidings.

Each notification becomes an activity in its recipient's notification feed
(``notification:<recipient pk>``, the group being a ``notification`` one):
``actor``, ``object`` and ``target`` as an action's
(:mod:`tidings.contrib.django.actstream.mapping`), its verb and timestamp,
the ``foreign_id`` ``"notifications.notification:<pk>"``, and ``extra`` its
``level``, ``description`` and keyword data. A soft-deleted one is skipped.

Read and unread come over per aggregate (the group's ``aggregation`` decides
which notifications share one): an aggregate all of whose notifications are
read is marked read (and so seen); one with any unread stays unread and
unseen. The table is read by recipient, so each recipient's aggregates are
known whole when they are marked, right after the recipient's last
notification is published. Marking read again changes nothing, so a run
after one that was killed, or after a complete one, leaves the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings

from tidings.contrib.django.actstream.mapping import ActionParts, Row, activity
from tidings.contrib.django.imports.common import (
    Item,
    Labels,
    data_of,
    feeds_checked,
    publish_rows,
    require_groups,
    source_model,
)
from tidings.contrib.django.imports.rows import batches
from tidings.contrib.django.imports.tally import NoProgress, Progress, Tally
from tidings.core.activity import validate
from tidings.core.feeds import FeedKind
from tidings.core.limits import MAX_MARK_AGGREGATES
from tidings.engine import Tidings

FOREIGN_ID_PREFIX = "notifications.notification:"
_FIELDS = [
    "recipient_id",
    "unread",
    "deleted",
    "level",
    "actor_content_type_id",
    "actor_object_id",
    "verb",
    "description",
    "target_content_type_id",
    "target_object_id",
    "action_object_content_type_id",
    "action_object_object_id",
    "timestamp",
]


def import_notifications(
    feeds: Tidings,
    *,
    group: str = "notification",
    batch_size: int = 1000,
    progress: Progress | None = None,
) -> list[Tally]:
    """Import the notifications into ``<group>:<recipient pk>`` (see the module)."""
    label = getattr(
        django_settings, "NOTIFICATIONS_NOTIFICATION_MODEL", "notifications.Notification"
    )
    model = source_model(label, "django-notifications-hq", "notifications")
    require_groups(feeds, [f"{group}:0"], "the recipients' notification feeds")
    kind = feeds.feed_groups[group].kind
    if kind != FeedKind.NOTIFICATION:
        raise ValueError(f"group {group!r} is {kind}; notifications go to a notification group")
    progress = progress or NoProgress()
    tally = Tally(label.lower())
    progress.begin(tally.table, model._default_manager.count())
    data = any(f.name == "data" for f in model._meta.concrete_fields)
    fields = [*_FIELDS, "data"] if data else _FIELDS
    states = _States(feeds)
    labels = Labels()
    for rows in batches(model, fields, batch_size, after=("recipient_id", "pk")):
        tally.read += len(rows)
        items: list[Item] = []
        unread: list[bool] = []
        for i, row in enumerate(rows):
            feed = f"{group}:{row['recipient_id']}"
            if row["deleted"]:
                tally.skip("deleted (soft delete)")
                continue
            why = feeds_checked(feeds, [feed])
            if why is not None:
                tally.skip(why)
                continue
            items.append(Item(i, [feed], _activity(row, labels)))
            unread.append(row["unread"])
        refused = publish_rows(feeds, items, tally)
        for item, flag in zip(items, unread, strict=True):
            if item.row not in refused:
                states.note(item.feeds[0], item.activity, unread=flag)
        states.mark(open_feed=f"{group}:{rows[-1]['recipient_id']}")
        feeds.admin.drain()
        progress.advance(len(rows))
    states.mark(open_feed=None)
    return [tally]


def _activity(row: dict[str, Any], labels: Labels) -> dict[str, Any]:
    extra = data_of(row.get("data"))
    extra["level"] = row["level"]
    parts = ActionParts(
        actor=Row(labels(row["actor_content_type_id"]), row["actor_object_id"]),
        verb=row["verb"],
        timestamp=row["timestamp"],
        action_object=labels.row(
            row["action_object_content_type_id"], row["action_object_object_id"]
        ),
        target=labels.row(row["target_content_type_id"], row["target_object_id"]),
        description=row["description"],
        data=extra,
    )
    return activity(parts, f"{FOREIGN_ID_PREFIX}{row['pk']}")


class _States:
    """Per recipient's feed, whether each of its aggregates holds an unread
    notification; a feed's aggregates without one are marked read once all
    its notifications are published (:meth:`mark`)."""

    def __init__(self, feeds: Tidings) -> None:
        self.feeds = feeds
        self.unread: dict[str, dict[str, bool]] = {}

    def note(self, feed: str, made: Mapping[str, Any], *, unread: bool) -> None:
        group = feed.partition(":")[0]
        key = self.feeds.deliverer.aggregate_keys(validate(made, now=self.feeds.clock.now()))[group]
        keys = self.unread.setdefault(feed, {})
        keys[key] = keys.get(key, False) or unread

    def mark(self, *, open_feed: str | None) -> None:
        """Mark what the recipients have read, but ``open_feed``'s, whose
        notifications may go on in the next batch."""
        for feed in [f for f in self.unread if f != open_feed]:
            read = [key for key, unread in self.unread.pop(feed).items() if not unread]
            for start in range(0, len(read), MAX_MARK_AGGREGATES):
                self.feeds.mark_read(feed, read[start : start + MAX_MARK_AGGREGATES])
