"""What both importers share: the source models, rows named by content type,
the feed groups checked first, and publishing a batch in transactions of
many feeds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ImproperlyConfigured

from tidings.contrib.django.actstream.mapping import Row, groups_hint
from tidings.contrib.django.imports.tally import Tally
from tidings.core.activity import validate
from tidings.core.clock import Deadline
from tidings.core.errors import ValidationError
from tidings.core.limits import MAX_BATCH
from tidings.engine import Tidings


class SourceMissing(LookupError):
    """The package an import reads from is not installed in this project."""


def source_model(label: str, package: str, app: str) -> Any:
    """The model ``label`` of ``package``, or :class:`SourceMissing` saying what to install."""
    try:
        return apps.get_model(label)
    except (LookupError, ValueError):
        raise SourceMissing(
            f"{label} is not a model of this project: install {package} and add "
            f"{app!r} to INSTALLED_APPS (the importer reads its tables)"
        ) from None


def data_of(value: object) -> dict[str, Any]:
    """A JSON column's value as an activity's ``extra`` keys (one that is not an
    object is kept under ``"data"``)."""
    if value is None:
        return {}
    return dict(value) if isinstance(value, Mapping) else {"data": value}


def require_groups(feeds: Tidings, wanted: Iterable[str], why: str) -> None:
    """Raise ImproperlyConfigured, before anything is written, unless every feed
    group of ``wanted`` (feed ids) is configured."""
    missing = sorted({f.partition(":")[0] for f in wanted} - set(feeds.feed_groups))
    if missing:
        raise ImproperlyConfigured(
            f"TIDINGS['groups'] lacks {', '.join(map(repr, missing))}, the feed groups of "
            f"{why}: add {groups_hint(missing)}"
        )


class Labels:
    """Content type ids to model labels (``"auth.user"``), each looked up once."""

    def __init__(self) -> None:
        self._labels: dict[int, str] = {}

    def __call__(self, content_type_id: int) -> str:
        label = self._labels.get(content_type_id)
        if label is None:
            ct = ContentType.objects.get_for_id(content_type_id)
            label = self._labels[content_type_id] = f"{ct.app_label}.{ct.model}"
        return label

    def row(self, content_type_id: int | None, object_id: object) -> Row | None:
        if content_type_id is None or object_id is None:
            return None
        return Row(self(content_type_id), str(object_id))


def feeds_checked(feeds: Tidings, targets: Sequence[str]) -> str | None:
    """Why ``targets`` cannot all be published to (None: they can)."""
    try:
        for feed in targets:
            feeds.check_feed(feed)
    except ValidationError as exc:
        return f"invalid feed: {exc}"
    return None


@dataclass(frozen=True)
class Item:
    """A row's activity and the feeds it is published to."""

    row: int
    feeds: Sequence[str]
    activity: Mapping[str, Any]


def publish(
    feeds: Tidings,
    items: Sequence[Item],
    new: Callable[[int], None],
    skip: Callable[[str], None],
) -> set[int]:
    """Publish the items, :data:`MAX_BATCH` activities to a transaction whatever
    their feeds; ``new(row)`` for each activity that was not there before.

    Each activity has a ``foreign_id``: those stored already are left alone.
    Publishing checks the activities; only when it refuses some are they
    checked one by one, and the rows it would refuse skipped whole
    (``skip(reason)`` once for each); returns those rows."""
    pending = [(item, feed) for item in items for feed in item.feeds]
    # What a run before published is passed over without being built again:
    # a rerun of a large import costs a lookup per batch.
    stored = feeds.activities.stored_foreign_ids(
        (feed, item.activity["foreign_id"]) for item, feed in pending
    )
    pending = [(i, f) for i, f in pending if (f, i.activity["foreign_id"]) not in stored]
    refused: set[int] = set()
    start = 0
    while start < len(pending):
        part = [(i, f) for i, f in pending[start : start + MAX_BATCH] if i.row not in refused]
        try:
            done = feeds.activities.publish_each([(f, i.activity) for i, f in part])
        except ValidationError:
            more = _refused(feeds, [i for i in items if i.row not in refused], skip)
            if not more:  # (not an activity's fault: nothing to skip)
                raise
            refused |= more
            continue  # the same part again, less the refused rows
        for (item, _), (_, added) in zip(part, done, strict=True):
            if added:
                new(item.row)
        start += MAX_BATCH
    return refused


def _refused(feeds: Tidings, items: Sequence[Item], skip: Callable[[str], None]) -> set[int]:
    refused: set[int] = set()
    now = feeds.clock.now()
    for item in items:
        try:
            validate(item.activity, now=now, check_feed=feeds.check_feed)
        except ValidationError as exc:
            refused.add(item.row)
            skip(f"invalid {exc}")
    return refused


def publish_rows(feeds: Tidings, items: Sequence[Item], tally: Tally) -> set[int]:
    """:func:`publish` a batch's items and tally their rows: written when any of
    a row's activities is new, already present when none is. Returns the rows
    refused."""
    written: set[int] = set()
    refused = publish(feeds, items, written.add, tally.skip)
    tally.written += len(written)
    tally.present += len({item.row for item in items} - written - refused)
    return refused


def deliver_all(feeds: Tidings, *, wait_seconds: float) -> int:
    """Carry out what waits in the outbox; returns the rows still waiting.

    Rows another process has claimed are left to it: a live runner finishes
    them soon, and those of a run that was killed are free again once its
    claim lapses (:data:`~tidings.core.limits.LEASE_MS`). Up to
    ``wait_seconds`` are spent waiting for either."""
    deadline = Deadline(wait_seconds)
    while True:
        feeds.admin.drain()
        pending = feeds.admin.pending()
        left = deadline.left()
        if not pending or not left:
            return pending
        time.sleep(min(1.0, left))
