"""The statements of the SQL feed stores that differ by dialect: sets of
feeds and ids travel as one parameter, a JSON array read with ``json_each``
on SQLite and an array read with ``unnest`` on PostgreSQL."""

#: Statements run through SQLAlchemy (named parameters), by dialect.
SQLITE = {
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT key, value FROM json_each(:counts) WHERE true "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
    "remove": (
        "DELETE FROM tidings_feed_entries WHERE feed IN (SELECT value FROM json_each(:feeds)) "
        "AND activity_id IN (SELECT value FROM json_each(:ids)) RETURNING feed"
    ),
    "shrink": (
        "UPDATE tidings_feed_sizes SET n = n - c.value FROM json_each(:counts) c "
        "WHERE tidings_feed_sizes.feed = c.key"
    ),
    "clear_entries": (
        "DELETE FROM tidings_feed_entries WHERE feed IN (SELECT value FROM json_each(:feeds))"
    ),
    "clear_sizes": (
        "DELETE FROM tidings_feed_sizes WHERE feed IN (SELECT value FROM json_each(:feeds))"
    ),
}

POSTGRES = {
    "insert": (
        "INSERT INTO tidings_feed_entries (feed, activity_id) "
        "SELECT f, i FROM unnest(CAST(:feeds AS text[])) f, unnest(CAST(:ids AS text[])) i "
        "ON CONFLICT DO NOTHING RETURNING feed"
    ),
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT k, v FROM unnest(CAST(:keys AS text[]), CAST(:values AS int[])) AS c(k, v) "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
    "remove": (
        "DELETE FROM tidings_feed_entries WHERE feed = ANY(CAST(:feeds AS text[])) "
        "AND activity_id = ANY(CAST(:ids AS text[])) RETURNING feed"
    ),
    "shrink": (
        "UPDATE tidings_feed_sizes SET n = n - c.v "
        "FROM unnest(CAST(:keys AS text[]), CAST(:values AS int[])) AS c(k, v) "
        "WHERE tidings_feed_sizes.feed = c.k"
    ),
    "clear_entries": "DELETE FROM tidings_feed_entries WHERE feed = ANY(CAST(:feeds AS text[]))",
    "clear_sizes": "DELETE FROM tidings_feed_sizes WHERE feed = ANY(CAST(:feeds AS text[]))",
}

# The hot write path, on the driver's cursor ("{p}": its placeholder), where
# SQLAlchemy's statement handling cost more than the statements.
RAW_SQLITE = {
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT key, value FROM json_each({p}) WHERE true "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
}
RAW_POSTGRES = {
    "insert_pairs": (
        "INSERT INTO tidings_feed_entries (feed, activity_id) "
        "SELECT f, i FROM unnest(CAST({p} AS text[]), CAST({p} AS text[])) AS p(f, i) "
        "ON CONFLICT DO NOTHING RETURNING feed"
    ),
    "grow": (
        "INSERT INTO tidings_feed_sizes (feed, n) "
        "SELECT k, v FROM unnest(CAST({p} AS text[]), CAST({p} AS int[])) AS c(k, v) "
        "ON CONFLICT (feed) DO UPDATE SET n = tidings_feed_sizes.n + excluded.n "
        "RETURNING feed, n"
    ),
}
