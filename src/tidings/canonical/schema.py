"""The SQL schema: the canonical store's tables and the SQL timeline store's.

Changes to these tables go through a new step in :mod:`tidings.canonical.migrations`.

What the code calls an *aggregate* (the activities an aggregated or
notification feed shows together) the stored names still call a *group*:
the tables ``tidings_groups``, ``tidings_group_members`` and
``tidings_group_marks``, their ``gkey`` columns, and the ``group_keys``
columns of activities and the outbox keep the old word, so that existing
databases need no migration. Only the Python names (``aggregates``,
``aggregate_members``, ``aggregate_marks``, ``AGGREGATE_KEY``) changed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

metadata = MetaData()

ID = String(32)
# Byte order on PostgreSQL too: delivery relies on follower chunks sorting
# like Python strings (one feed group's feeds contiguous), and a locale collation
# would also make every comparison slower.
FEED = String(255).with_variant(String(255, collation="C"), "postgresql")

#: Every accepted activity, once. ``feed`` is the feed it was added to.
activities = Table(
    "tidings_activities",
    metadata,
    Column("id", ID, primary_key=True),
    Column("feed", FEED, nullable=False),
    Column("foreign_id", String(255)),
    Column("doc", LargeBinary, nullable=False),
    # JSON {feed group: aggregate key} (schema v2): the aggregate the activity
    # joins in each aggregated feed group, fixed at publish so that removing it
    # finds the same aggregates after its `extra` or a template changed.
    Column("group_keys", LargeBinary),
    # (schema v5) When it was accepted (µs): a notification aggregate rebuilt from
    # here is seen if it was marked seen after its last member was accepted.
    Column("accepted_us", BigInteger),
    # (schema v7) 1 at publish, one more for each update: updates lock the row,
    # so versions follow commit order, and the Redis activity cache keeps a
    # version only over an older one.
    Column("version", BigInteger, nullable=False, server_default="1"),
    UniqueConstraint("feed", "foreign_id", name="tidings_activities_feed_foreign_id"),
    Index("tidings_activities_feed_id", "feed", "id"),
)

#: The feeds an activity named in ``to``: lets unfollow and rebuilds tell a
#: feed's own deliveries from those that came through a follow.
addressed = Table(
    "tidings_addressed",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("activity_id", ID, primary_key=True),
    sqlite_with_rowid=False,
)

#: (schema v8) Entries a feed's owner removed from it alone: an activity that
#: reached the feed by ``to`` or through a follow stays everywhere else, and
#: reads of the feed's history, pulled sources, follow copies and backfills
#: leave it out, so a rebuild never brings it back.
hidden = Table(
    "tidings_hidden",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("activity_id", ID, primary_key=True),
    Index("tidings_hidden_activity", "activity_id"),
    sqlite_with_rowid=False,
)

#: (schema v18) Activities placed in feeds rather than published: each is in
#: the feeds of its ``to`` (its own feed among them) and reaches no follower of
#: any, so delivery, follow copies, backfills and the reads of pulled sources
#: and of rebuilt followers leave it out (getstream's ``add_to_many``).
placed = Table(
    "tidings_placed",
    metadata,
    Column("activity_id", ID, primary_key=True),
    sqlite_with_rowid=False,
)

follows = Table(
    "tidings_follows",
    metadata,
    Column("follower", FEED, primary_key=True),
    Column("source", FEED, primary_key=True),
    Column("created_ms", BigInteger, nullable=False),
    # (schema v3) The oldest id of the source the follower shows: the floor of
    # the follow's time, lowered to the oldest activity copied by the follow.
    # Deep reads (past a capped feed's end) and pulled sources start here, so
    # a feed's history is what it would hold with no cap.
    Column("history_from", ID),
    # (schema v5) The follower's delivery tier: 0 read recently (Celery's high
    # queue), 1 not recently (low), 2 idle (skipped by deliveries until its
    # owner reads again). ``tier_ms`` is when it last changed, so a delivery
    # split into parts before a change still reaches the follower (see
    # Outbox.split).
    Column("tier", Integer, nullable=False, server_default="0"),
    Column("tier_ms", BigInteger, nullable=False, server_default="0"),
    # (schema v9) The outbox id the follow came after: every delivery of the
    # source with an id up to it was accepted before the follow (publishes
    # and follows of one source are serialised while it is read), so it
    # reaches the follower through the follow's copy, never by delivery; a
    # delivery reaches the follows with ``since_row < id`` only.
    Column("since_row", BigInteger, nullable=False, server_default="0"),
    # Covers every delivery query: follower ranges filtered by tier and by
    # ``since_row`` are read from the index alone.
    Index(
        "tidings_follows_source_tier_since", "source", "follower", "tier", "tier_ms", "since_row"
    ),
    sqlite_with_rowid=False,
)

#: (schema v9) Recent unfollows, kept for ``UNFOLLOW_LOG_MS``: a delivery that
#: was writing while one happened takes its entry back out (see
#: Deliverer.take_back). Written in the unfollow's transaction.
unfollows = Table(
    "tidings_unfollows",
    metadata,
    Column("source", FEED, primary_key=True),
    Column("follower", FEED, primary_key=True),
    Column("ms", BigInteger, nullable=False),
    Index("tidings_unfollows_ms", "ms"),
    sqlite_with_rowid=False,
)

#: (schema v5) When each follower feed was last read, the tier its follows
#: are in, and whether it is ``active``, ``idle`` (not read for
#: ``inactive_days``: skipped by deliveries, its materialised feed cleared) or
#: ``regenerating`` (read again: being rebuilt from the canonical store;
#: ``state_ms`` is the request's token, strictly increasing per feed, and
#: ``lease_ms`` keeps two runners off one rebuild). Every transaction that
#: changes a feed's tier locks its row here first, then its follows.
feed_reads = Table(
    "tidings_feed_reads",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("read_ms", BigInteger, nullable=False),
    Column("tier", Integer, nullable=False, server_default="0"),
    Column("state", String(16), nullable=False),
    Column("state_ms", BigInteger, nullable=False),
    Column("lease_ms", BigInteger, nullable=False, server_default="0"),
    Index("tidings_feed_reads_state", "state", "lease_ms"),
)

#: Per-feed counters kept in the same transaction as the follow that moves them.
feed_stats = Table(
    "tidings_feed_stats",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("followers", BigInteger, nullable=False, server_default="0"),
    Column("following", BigInteger, nullable=False, server_default="0"),
    # (schema v11) Activities published into the feed, kept by the publish
    # (and removal) transaction.
    Column("activities", BigInteger, nullable=False, server_default="0"),
    # (schema v13) Bumped by every change to the feed's followers as a source
    # (a follow, an unfollow, a follower's tier moving): a delivering process
    # keeps follower lists and reads them again only when this moved.
    Column("follows_version", BigInteger, nullable=False, server_default="0"),
)

#: (schema v3) Sources not pushed: "pull" (readers merge them) or "draining"
#: (pushed again, still merged until their followers have been backfilled).
#: A source without a row is pushed.
fanout = Table(
    "tidings_fanout",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("strategy", String(16), nullable=False),
    Column("changed_ms", BigInteger, nullable=False),
)

#: Pending deliveries. A row is written in the transaction that accepts (or
#: removes) an activity and deleted when every target has been written;
#: ``position`` is the last follower done, so a restart resumes after it.
#: (schema v6) A "copy" row is written in the transaction that creates follows
#: and copies their sources' newest activities into the followers.
#:
#: Ids are never reused (schema v6: AUTOINCREMENT on SQLite, whose plain
#: INTEGER PRIMARY KEY hands a deleted newest id out again; a sequence on
#: PostgreSQL): outbox parts and task messages name rows by id.
outbox = Table(
    "tidings_outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),  # "deliver" | "retract" | "copy"
    Column("activity_id", ID, nullable=False),  # "" for "copy"
    Column("source", FEED, nullable=False),  # "" for "copy"
    # JSON list: the `to` feeds; for "copy", {"limit": copy_limit, "follows":
    # [[follower, source, newest id to copy], ...]} (position: follows done).
    Column("targets", LargeBinary, nullable=False),
    # The activity's JSON (schema v2): a retraction outlives the activity row,
    # and aggregated feeds need its fields to find the aggregate it joined.
    Column("doc", LargeBinary),
    Column("group_keys", LargeBinary),
    Column("position", FEED),
    Column("lease_until_ms", BigInteger, nullable=False, server_default="0"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("created_ms", BigInteger, nullable=False),
    # (schema v6) Random, set by each claim: a runner's progress, release and
    # completion apply only while the row is still its claim.
    Column("claim_token", BigInteger, nullable=False, server_default="0"),
    sqlite_autoincrement=True,
)

#: Follower ranges of an outbox row handed to distributed workers (schema v3):
#: the followers of ``tier`` (schema v5: "high", "low"; "all" for parts split
#: before) after ``after`` up to ``last`` (inclusive; NULL: to the end),
#: recorded once per row at ``split_ms`` so a retried or re-sent part covers
#: the same feeds.
outbox_parts = Table(
    "tidings_outbox_parts",
    metadata,
    Column("row_id", Integer, primary_key=True),
    Column("tier", String(8), primary_key=True),
    Column("after", FEED, primary_key=True),  # "" for the first part
    Column("last", FEED),
    Column("done", Integer, nullable=False, server_default="0"),
    Column("split_ms", BigInteger, nullable=False, server_default="0"),
    sqlite_with_rowid=False,
)

#: The SQL timeline store: which activity ids each feed holds.
feed_entries = Table(
    "tidings_feed_entries",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("activity_id", ID, primary_key=True),
    sqlite_with_rowid=False,
)

#: Entry counts of the SQL timeline store, so trimming touches only full feeds.
feed_sizes = Table(
    "tidings_feed_sizes",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("n", Integer, nullable=False),
    sqlite_with_rowid=False,
)

#: The SQL aggregate store (aggregated and notification feeds): one row an
#: aggregate, ordered by its newest member, with its seen/read state.
AGGREGATE_KEY = String(200).with_variant(String(200, collation="C"), "postgresql")

aggregates = Table(
    "tidings_groups",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("gkey", AGGREGATE_KEY, primary_key=True),
    Column("newest", ID, nullable=False),
    Column("seen", Integer, nullable=False, server_default="0"),
    Column("read", Integer, nullable=False, server_default="0"),
    Index("tidings_groups_position", "feed", "newest", "gkey"),
    sqlite_with_rowid=False,
)

#: Every activity an aggregated feed holds, with the aggregate it joined.
aggregate_members = Table(
    "tidings_group_members",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("activity_id", ID, primary_key=True),
    Column("gkey", AGGREGATE_KEY, nullable=False),
    Column("actor", String(255), nullable=False),
    Index("tidings_group_members_group", "feed", "gkey", "activity_id"),
    sqlite_with_rowid=False,
)

#: (schema v5) Seen/read marks of notification feeds, so a rebuild restores
#: them: per (feed, aggregate key) — or, with ``every`` = 1 and an empty key,
#: for every aggregate at once — when it was last marked seen and read (µs;
#: 0: never). Aggregate stores hold the live state; this is its durable record.
aggregate_marks = Table(
    "tidings_group_marks",
    metadata,
    Column("feed", FEED, primary_key=True),
    Column("every", Integer, primary_key=True),
    Column("gkey", AGGREGATE_KEY, primary_key=True),
    Column("seen_us", BigInteger, nullable=False, server_default="0"),
    Column("read_us", BigInteger, nullable=False, server_default="0"),
    sqlite_with_rowid=False,
)


def _reaction_columns() -> list[Column[Any]]:
    """A reaction's columns after its id: the live table's and the trash's
    (new objects each time: a column belongs to one table)."""
    return [
        Column("activity_id", ID, nullable=False),
        Column("parent", ID, nullable=False),
        Column("depth", Integer, nullable=False),
        Column("kind", String(64), nullable=False),
        Column("user_id", String(255), nullable=False),
        Column("data", LargeBinary, nullable=False),
        Column("targets", LargeBinary, nullable=False),
        Column("notice", ID, nullable=False),
        Column("notice_feed", FEED, nullable=False),
        Column("once", String(255)),
        Column("created_us", BigInteger, nullable=False),
        Column("updated_us", BigInteger, nullable=False),
    ]


#: (schema v10) Reactions to activities, and to other reactions (``parent``;
#: "" for a reaction to the activity). ``once`` is the user for kinds held
#: once per user (``like``), NULL otherwise: NULLs never collide, so the
#: unique key holds only for those kinds. ``notice`` is the id of the
#: notification activity a reaction with ``to`` published ("" when none), in
#: the feed ``notice_feed``.
reactions = Table(
    "tidings_reactions",
    metadata,
    Column("id", ID, primary_key=True),
    *_reaction_columns(),
    UniqueConstraint("activity_id", "parent", "kind", "once", name="tidings_reactions_once"),
    # Pages by kind and by activity, counts of the last hour (velocity).
    Index("tidings_reactions_kind", "activity_id", "parent", "kind", "id"),
    Index("tidings_reactions_newest", "activity_id", "parent", "id"),
    # A parent's children (the ``parent`` column leads: "" rows are many).
    Index("tidings_reactions_children", "parent", "kind", "id"),
    # A reader's own reactions on a page.
    Index("tidings_reactions_user", "user_id", "activity_id"),
)

#: (schema v17) Reactions removed softly, restorable: the rows of
#: ``tidings_reactions`` as they were, moved here, so that every read of the
#: live table leaves them out without a filter. ``root`` is the reaction whose
#: removal took the row along (itself, or an ancestor); ``notice_doc`` and
#: ``notice_keys`` are the notification activity retracted with it and its
#: aggregate keys (NULL: none), published again on restore.
reaction_trash = Table(
    "tidings_reaction_trash",
    metadata,
    Column("id", ID, primary_key=True),
    Column("root", ID, nullable=False),
    *_reaction_columns(),
    Column("removed_us", BigInteger, nullable=False),
    Column("notice_doc", LargeBinary),
    Column("notice_keys", LargeBinary),
    Index("tidings_reaction_trash_root", "root"),
    Index("tidings_reaction_trash_parent", "parent"),
    Index("tidings_reaction_trash_activity", "activity_id"),
)

#: (schema v10) Reaction counts per (activity, parent, kind), moved in the
#: transaction of the reaction they count, so they are exact.
reaction_counts = Table(
    "tidings_reaction_counts",
    metadata,
    Column("activity_id", ID, primary_key=True),
    Column("parent", ID, primary_key=True),
    Column("kind", String(64), primary_key=True),
    Column("n", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

#: (schema v10) The newest reactions of each (activity, parent, kind) (up to
#: MAX_LATEST), one JSON object a line, newest first, rewritten with them:
#: pages' latest_reactions read these rows instead of the reactions. Apart
#: from the counts, whose rows a ranking reads by the thousand and which
#: must stay narrow.
reaction_latest = Table(
    "tidings_reaction_latest",
    metadata,
    Column("activity_id", ID, primary_key=True),
    Column("parent", ID, primary_key=True),
    Column("kind", String(64), primary_key=True),
    Column("latest", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

#: (schema v10) How many reactions each user made to each actor's activities
#: (the ``affinity`` of ranked feeds), kept with the reactions.
affinities = Table(
    "tidings_affinities",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("actor", String(255), primary_key=True),
    Column("n", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

#: (schema v10) Frozen orders of ranked feed pages (the SQL snapshot store).
rank_snapshots = Table(
    "tidings_rank_snapshots",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("expires_ms", BigInteger, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Index("tidings_rank_snapshots_expiry", "expires_ms"),
)

#: (schema v11) Users: the handle as given (for display) and its profile.
users = Table(
    "tidings_users",
    metadata,
    Column("id", String(255), primary_key=True),
    Column("handle", String(64), nullable=False),
    Column("profile", LargeBinary, nullable=False),
    Column("created_us", BigInteger, nullable=False),
    Column("updated_us", BigInteger, nullable=False),
    # Set when deleted: the row stays, so enrichment shows a tombstone (a
    # deleted user) rather than the bare id (an id no user ever had).
    Column("deleted_us", BigInteger),
    # (schema v16) Set when the id was a deleted user's, created again after
    # the keep time: when that user was deleted. What was published under the
    # id before is theirs (enrichment, counts), not this user's.
    Column("replaced_us", BigInteger),
)

#: (schema v11; v15: the key is also the confusable skeleton, see
#: :mod:`tidings.core.handles`) Every handle key (NFKC + casefold) held: a user's current one
#: (``released_ms`` NULL) and the ones they renamed away from, which keep
#: resolving to them, and stay theirs, until ``released_ms`` plus the setting
#: ``handle_keep_seconds``. The primary key makes a claim race have one winner.
handles = Table(
    "tidings_handles",
    metadata,
    Column("hkey", String(255), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("released_ms", BigInteger),
    Index("tidings_handles_user", "user_id"),
)

#: (schema v11) Objects activities refer to as ``type:id`` (``ref``); (v14)
#: ``owner``, the user who created one (NULL: the application's), kept on its
#: tombstone so that nobody else takes the ref over.
objects = Table(
    "tidings_objects",
    metadata,
    Column("ref", String(330), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("created_us", BigInteger, nullable=False),
    Column("updated_us", BigInteger, nullable=False),
    Column("deleted_us", BigInteger),  # as for users
    Column("owner", String(255)),
)

#: (schema v12) Users' mutes: ``until_ms`` NULL for ever; ``notifications`` 1
#: when notifications from the target are hidden too.
mutes = Table(
    "tidings_mutes",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("target", String(255), primary_key=True),
    Column("until_ms", BigInteger),
    Column("notifications", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

#: (schema v12) Users' blocks. Indexed both ways: a follow checks whether
#: either of its users blocks the other.
blocks = Table(
    "tidings_blocks",
    metadata,
    Column("user_id", String(255), primary_key=True),
    Column("target", String(255), primary_key=True),
    Column("created_ms", BigInteger, nullable=False),
    Index("tidings_blocks_target", "target", "user_id"),
    sqlite_with_rowid=False,
)

#: (schema v12) Users' keyword filters (JSON ``keywords`` and ``contexts``).
keyword_filters = Table(
    "tidings_filters",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("keywords", LargeBinary, nullable=False),
    Column("whole_word", Integer, nullable=False),
    Column("contexts", LargeBinary, nullable=False),
    Column("until_ms", BigInteger),
    Column("created_ms", BigInteger, nullable=False),
    Index("tidings_filters_user", "user_id"),
)
