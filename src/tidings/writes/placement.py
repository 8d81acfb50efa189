"""Placing an activity in feeds: one activity, in each feed named, and in no
feed that follows any of them (getstream's ``add_to_many``).

It is stored once (one id, whichever feed shows it): its own feed is the first
named and its ``to`` the others, and a mark keeps it from every follower (see
:mod:`tidings.canonical.placements`). Its writes into the feeds follow the
commit, as a retarget's do (:mod:`tidings.writes.targets`): there is no outbox
row to carry out, since there is no follower to reach, and a write lost there
is put right by a rebuild of that feed from the canonical store. Taken out of
one feed (by id, or by ``foreign_id`` in that feed), it stays in the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tidings.canonical.activities import Accepted
from tidings.core.activity import Activity, NewActivity, validate
from tidings.core.errors import ValidationError
from tidings.writes.activities import ActivityWrites
from tidings.writes.targets import checked_feeds


def place(
    writes: ActivityWrites, feeds: Sequence[str], activity: NewActivity | Mapping[str, Any]
) -> tuple[Activity, bool]:
    """Store ``activity`` placed in ``feeds`` (1 to :data:`MAX_TO`, each a
    configured feed), in one transaction, then write it into them. Returns
    ``(stored, created)``: with a ``foreign_id`` already used in the first
    feed, the activity stored with it, and nothing changed."""
    named = checked_feeds(writes, feeds, "feeds", least=1)
    given_to = activity.to if isinstance(activity, NewActivity) else activity.get("to")
    if given_to:
        raise ValidationError(
            "an activity placed in feeds is in those and no other: give no to", field="to"
        )
    others = list(named[1:])
    raw: NewActivity | Mapping[str, Any] = (
        replace(activity, to=others)
        if isinstance(activity, NewActivity)
        else {**activity, "to": others}
    )
    new = validate(raw, now=writes.clock.now(), check_feed=writes.check_feed)
    item = Accepted(named[0], new, writes.deliverer.aggregate_keys(new), writes.clock.us())
    stored, created = writes.canonical.placements.place(item)
    if created:
        writes.stored([(item, stored)])
    return stored, created
