"""Every size limit tidings enforces, in one place.

Inputs past a limit are refused with a :class:`ValidationError` that names
it; the HTTP schema documents the same numbers. The bounds that protect this
process's memory are here too. (``ids.MAX_MS`` is not a limit but the range
of the id format, and stays with it.)
"""

from __future__ import annotations

from tidings.core.errors import ValidationError

# -- activities ---------------------------------------------------------------

MAX_VERB_LENGTH = 64
MAX_REF_LENGTH = 255  # actor, object, target, foreign_id
MAX_TO = 100
MAX_ACTIVITY_BYTES = 10_240  # the serialised activity, extra included

# -- feeds, aggregates, cursors -----------------------------------------------------

MAX_FEED_ID_LENGTH = 255
#: Aggregate keys longer than this are replaced by a digest (so the key of any
#: template over bounded fields stays bounded, and distinct keys stay distinct).
MAX_AGGREGATE_KEY_LENGTH = 200
MAX_CURSOR_LENGTH = 1024

# -- one call to the engine -----------------------------------------------------

#: Entries (or aggregates, or follows) in one page.
MAX_PAGE_SIZE = 100
#: Activities a new follow copies from its source's history.
MAX_COPY_LIMIT = 1000
MAX_FOLLOW_BATCH = 1000
#: Aggregate keys one mark_seen / mark_read names.
MAX_MARK_AGGREGATES = 1000

# -- one HTTP request -----------------------------------------------------------

#: Activities in one batch request.
MAX_BATCH = 100
#: `to` feeds summed over a batch's activities: each is a write, so a batch
#: of 100 activities of 100 each would be 10,000 writes for one request.
MAX_BATCH_TO = 1000
#: Largest request body accepted: a batch of 100 activities of 10 KB each.
MAX_BODY_BYTES = 1_100_000

# -- this process's memory ------------------------------------------------------

#: How long a feed confirmed active stays so without asking the database.
MAX_READ_WINDOW_MS = 300_000
#: A read tracker forgets everything beyond this many feeds (and asks again).
MAX_TRACKED = 200_000


def check_page_limit(limit: object) -> None:
    """Raise unless ``limit`` is a page size from 1 to :data:`MAX_PAGE_SIZE`."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValidationError(f"must be an integer from 1 to {MAX_PAGE_SIZE}", field="limit")


# -- caches -----------------------------------------------------------------------

#: How long a cached activity lives in Redis (``activity_cache_seconds``): an
#: entry a reader stopped asking for is not held forever.
DEFAULT_ACTIVITY_CACHE_SECONDS = 86_400
MAX_ACTIVITY_CACHE_SECONDS = 30 * 86_400

#: How long a runner owns an outbox row it claimed before another may take
#: it over (progress is recorded within it: a chunk takes far less).
LEASE_MS = 60_000

#: Outbox rows a runner claims at once (small ones are delivered as a batch).
CLAIM_ROWS = 1024

#: Hash partitions of activities and of follows that ``tidings migrate
#: --partition`` makes when not told how many: enough that each stays a
#: fraction of the table at a billion rows, few enough that a lookup of an
#: activity by id alone (which probes every partition's index) stays cheap.
DEFAULT_PARTITIONS = 16
#: The most partitions allowed: each is a table with its own indexes.
MAX_PARTITIONS = 256
