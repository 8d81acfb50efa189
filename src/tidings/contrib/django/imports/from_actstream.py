"""django-activity-stream's ``Action`` and ``Follow`` tables into tidings.

Actions first, then follows, each table in batches by primary key. An action
becomes activities as the shim publishes it
(:mod:`tidings.contrib.django.actstream.mapping`), with the ``foreign_id``
``"actstream.action:<pk>"`` and its own timestamp. A follow is the shim's
``follow(user, obj, actor_only=...)`` (its ``flag`` is not kept: a stream of
any flag is every follow's), and copies in the newest
:data:`~tidings.core.limits.MAX_COPY_LIMIT` activities of each feed it
follows: a home feed then holds what actstream's ``user_stream`` shows, and
its history (read past the feed's ``max_length``) starts where the copy does.
(Were follows made first, the actions would reach the home feeds as they
were published, but a follow's history starts when it was made, so reads
past ``max_length`` would not reach the older actions.)

Running again adds nothing: the ``foreign_id`` makes a publish repeat-safe,
and a follow made again is no new follow. Each batch is committed, then
delivered (``feeds.admin.drain()``), before the next is read: a run that is
killed leaves whole transactions, whose deliveries wait in the outbox, and
the next run finds them present and delivers what waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tidings.contrib.django.actstream.mapping import (
    ACTSTREAM_GROUPS,
    FOREIGN_ID_PREFIX,
    ActionParts,
    Row,
    activity,
    object_feeds,
)
from tidings.contrib.django.actstream.mapping import (
    feeds as action_feeds,
)
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
from tidings.contrib.django.refs import feed_for, home_feed_for
from tidings.core.limits import MAX_COPY_LIMIT, MAX_FOLLOW_BATCH
from tidings.engine import Tidings

PACKAGE, APP = "django-activity-stream", "actstream"
_ACTION_FIELDS = [
    "actor_content_type_id",
    "actor_object_id",
    "verb",
    "description",
    "target_content_type_id",
    "target_object_id",
    "action_object_content_type_id",
    "action_object_object_id",
    "timestamp",
    "public",
]


def import_actstream(
    feeds: Tidings, *, batch_size: int = 1000, progress: Progress | None = None
) -> list[Tally]:
    """Import actstream's actions, then its follows (see the module)."""
    follow_model = source_model("actstream.Follow", PACKAGE, APP)
    action_model = source_model("actstream.Action", PACKAGE, APP)
    progress = progress or NoProgress()
    labels = Labels()
    _check_groups(feeds, follow_model, action_model, labels)
    actions = _actions(feeds, action_model, labels, batch_size, progress)
    return [actions, _follows(feeds, follow_model, labels, batch_size, progress)]


def _check_groups(feeds: Tidings, follow_model: Any, action_model: Any, labels: Labels) -> None:
    """Every feed group the import will write to is configured: one query per
    table for the models that act or are followed, before anything is written."""
    followed = follow_model._default_manager.values_list("content_type_id")
    acting = action_model._default_manager.filter(public=True).values_list("actor_content_type_id")
    wanted = [home_feed_for(0, feeds.settings), *(f"{group}:0" for group in ACTSTREAM_GROUPS)]
    for (content_type_id,) in [*followed.distinct(), *acting.distinct()]:
        wanted.append(feed_for(labels(content_type_id), 0, feeds.settings))
    require_groups(feeds, wanted, "the models that act or are followed in actstream")


def _follows(feeds: Tidings, model: Any, labels: Labels, size: int, progress: Progress) -> Tally:
    tally = Tally("actstream.follow")
    progress.begin(tally.table, model._default_manager.count())
    fields = ["user_id", "content_type_id", "object_id", "actor_only"]
    for rows in batches(model, fields, size):
        pairs: list[tuple[int, tuple[str, str]]] = []
        for i, row in enumerate(rows):
            tally.read += 1
            home = home_feed_for(row["user_id"], feeds.settings)
            obj = Row(labels(row["content_type_id"]), str(row["object_id"]))
            sources = object_feeds(obj, feeds.settings, actor_only=row["actor_only"])
            why = feeds_checked(feeds, [home, *sources])
            if why is not None:
                tally.skip(why)
                continue
            pairs += [(i, (home, source)) for source in sources]
        made: set[tuple[str, str]] = set()
        for start in range(0, len(pairs), MAX_FOLLOW_BATCH):
            part = [pair for _, pair in pairs[start : start + MAX_FOLLOW_BATCH]]
            made.update(feeds.follow_many(part, copy_limit=MAX_COPY_LIMIT))
        written = {i for i, pair in pairs if pair in made}
        tally.written += len(written)
        tally.present += len({i for i, _ in pairs} - written)
        feeds.admin.drain()
        progress.advance(len(rows))
    return tally


def _actions(feeds: Tidings, model: Any, labels: Labels, size: int, progress: Progress) -> Tally:
    tally = Tally("actstream.action")
    progress.begin(tally.table, model._default_manager.count())
    data = any(f.name == "data" for f in model._meta.concrete_fields)
    fields = [*_ACTION_FIELDS, "data"] if data else _ACTION_FIELDS
    for rows in batches(model, fields, size):
        tally.read += len(rows)
        publish_rows(feeds, list(_items(feeds, rows, labels, tally)), tally)
        feeds.admin.drain()
        progress.advance(len(rows))
    return tally


def _items(
    feeds: Tidings, rows: list[dict[str, Any]], labels: Labels, tally: Tally
) -> Iterable[Item]:
    """Each action's activity and feeds; a row whose feeds cannot be is skipped
    (the reason tallied)."""
    for i, row in enumerate(rows):
        parts = ActionParts(
            actor=Row(labels(row["actor_content_type_id"]), row["actor_object_id"]),
            verb=row["verb"],
            timestamp=row["timestamp"],
            action_object=labels.row(
                row["action_object_content_type_id"], row["action_object_object_id"]
            ),
            target=labels.row(row["target_content_type_id"], row["target_object_id"]),
            description=row["description"],
            public=row["public"],
            data=data_of(row.get("data")),
        )
        targets = action_feeds(parts, feeds.settings)
        why = feeds_checked(feeds, targets)
        if why is not None:
            tally.skip(why)
            continue
        yield Item(i, targets, activity(parts, f"{FOREIGN_ID_PREFIX}{row['pk']}"))
