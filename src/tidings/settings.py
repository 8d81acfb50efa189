"""One typed settings object, read once at the edge.

Sources, highest priority first: keyword arguments, ``TIDINGS_*`` environment
variables, then a TOML file (``tidings.toml`` in the working directory, or the
path in ``TIDINGS_CONFIG``). Library code never reads the environment itself:
it receives a :class:`Settings`.

Groups given in configuration are merged over the defaults, so adding a
``[groups.site]`` table keeps ``user``, ``timeline`` and ``notification``.
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tidings.core.feeds import DEFAULT_GROUPS, FeedGroup, parse_feed_id
from tidings.core.limits import (
    DEFAULT_ACTIVITY_CACHE_SECONDS,
    MAX_ACTIVITY_CACHE_SECONDS,
    MAX_PARTITIONS,
)
from tidings.core.reactions import MAX_LATEST, check_kind


class StoreName(StrEnum):
    """Where materialised feeds live (``timeline_store``)."""

    #: Redis when ``redis_url`` is set, else SQL.
    AUTO = "auto"
    MEMORY = "memory"
    SQL = "sql"
    REDIS = "redis"


class SqliteSynchronous(StrEnum):
    """SQLite's ``PRAGMA synchronous`` for the canonical database (``sqlite_synchronous``)."""

    NORMAL = "normal"
    FULL = "full"


TaskRunnerName = Literal["thread", "process", "celery"]


#: Longest list of ``stream_keys``: each request looks its key up, and an
#: application has one key per environment, not hundreds.
MAX_STREAM_KEYS = 100
#: The shortest API secret accepted: HS256 keys shorter than the hash are
#: brute-forceable (Stream's own secrets are longer).
MIN_STREAM_SECRET_LENGTH = 32


class StreamKey(BaseModel):
    """An API key and secret of getstream's v2 protocol (``stream_keys``):
    clients holding them may reach the feeds of ``groups`` under ``/api/v1.0/``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    secret: str = Field(min_length=MIN_STREAM_SECRET_LENGTH, max_length=512)
    groups: frozenset[str] = Field(min_length=1, max_length=64)


#: A host name or an IPv4 or IPv6 address, as ``web_app_hosts`` holds them.
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|[0-9a-f:.]{2,45}")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TIDINGS_", extra="forbid", frozen=True, toml_file="tidings.toml"
    )

    database_url: str = "sqlite:///tidings.canonical.db"
    redis_url: str | None = None
    #: Where materialised feeds live; ``auto`` is Redis when ``redis_url`` is set, else SQL.
    timeline_store: StoreName = StoreName.AUTO
    #: Prefix of every Redis key, so several deployments can share a server.
    namespace: str = Field(default="tidings", pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    #: How long the Redis store caches an activity's JSON after writing it;
    #: reads that miss it refill it from the canonical store.
    activity_cache_seconds: int = Field(
        default=DEFAULT_ACTIVITY_CACHE_SECONDS, ge=1, le=MAX_ACTIVITY_CACHE_SECONDS
    )
    #: Signs cursors (and, in the HTTP service, tokens).
    secret: str | None = None
    groups: dict[str, FeedGroup] = Field(default_factory=lambda: dict(DEFAULT_GROUPS))
    #: SQLite: ``normal`` commits without fsync (WAL): every acknowledged write
    #: survives the process being killed, and a power loss may lose the last
    #: moments of writes; ``full`` fsyncs every commit (publishes share commits,
    #: so concurrent publishers share fsyncs) and survives power loss too.
    sqlite_synchronous: SqliteSynchronous = SqliteSynchronous.NORMAL
    #: SQLite: page cache per connection, in MiB. Deliveries append to the end
    #: of every follower feed they reach; a cache holding those pages keeps
    #: them from being read again for each batch.
    sqlite_cache_mb: int = Field(default=64, ge=2, le=65_536)
    #: PostgreSQL: connections each engine keeps open in each of its two
    #: pools, one for statements that commit by themselves (reads, publishes,
    #: delivery claims), one for transactions (follows, removals, reactions);
    #: the most recently used is handed out first, so its prepared statements
    #: stay warm. A burst may open twice as many more in each, closed once
    #: given back while this many are idle. Publishes share one connection
    #: (group commit); each delivery thread and each concurrent read takes one.
    postgres_pool_size: int = Field(default=5, ge=1, le=1000)
    #: PostgreSQL: hash partitions of activities (by feed) and of follows (by
    #: source) in a database created by this engine; 0 (the default): plain
    #: tables. Opt-in because each lookup of an activity by id alone probes
    #: every partition (hydrating a page that missed the cache: 5-9x slower
    #: with 16, docs/benchmarks.md); a database that needs them, for size or
    #: for Citus, gets them here or, when it exists, online with ``tidings
    #: migrate --partition`` (which takes this count, or 16 when it is 0).
    postgres_partitions: int = Field(default=0, ge=0, le=MAX_PARTITIONS)
    #: Follower feeds written per round trip by a delivery.
    delivery_chunk_size: int = Field(default=5000, ge=1, le=50_000)
    #: Threads of the in-process delivery runner.
    delivery_threads: int = Field(default=1, ge=1, le=64)
    #: The longest the in-process runner waits between busy passes so that
    #: publishes gather into larger ones: throughput against delivery lag.
    #: Default: 50 ms where feeds are rows of the SQLite database (a pass costs a
    #: commit of every page it dirties), else 10 ms.
    delivery_linger_ms: int | None = Field(default=None, ge=0, le=1000)
    #: Who carries out deliveries: in-process threads, a child process of the
    #: engine's (``process``: another core; needs ``redis_url`` for live
    #: events), or Celery workers (``tidings worker``), each task a part of
    #: ``delivery_chunk_size`` followers.
    task_runner: TaskRunnerName = "thread"
    #: The Celery broker (``redis://…`` or ``amqp://…``); default: ``redis_url``.
    broker_url: str | None = None
    #: How long a dispatched delivery may stay pending before its undone parts
    #: are sent again (a worker died holding one; the broker lost it). Longer
    #: than the queue's worst backlog, or parts are sent twice (harmlessly).
    celery_redispatch_seconds: float = Field(default=300.0, ge=0.1, le=86_400)
    #: A directory the processes of a deployment on one host keep their
    #: Prometheus figures in (prometheus_client's multiprocess mode): the
    #: workers of ``tidings serve`` and the pool processes of ``tidings
    #: worker`` write there, and a scrape of the server's ``/metrics`` reports
    #: them all. Empty it before the deployment starts. Unset: a server of
    #: several workers makes a private one, and Celery workers keep none.
    metrics_dir: str | None = Field(default=None, min_length=1, max_length=4096)
    #: Sources with more followers than this are pulled at read time, not pushed
    #: (after ``tidings reclassify``).
    pull_threshold: int = Field(default=10_000, ge=0)
    #: A pulled source is pushed again below ``pull_threshold * (1 - pull_hysteresis)``.
    pull_hysteresis: float = Field(default=0.1, ge=0, lt=1)
    #: After a source goes to pull, its flat followers are still pushed this long:
    #: readers look up whether anything is pulled at most every half of it, so a
    #: reader that has not looked yet misses nothing.
    pull_grace_seconds: float = Field(default=10.0, ge=0, le=3600)
    #: Follower feeds not read for this many days are skipped by deliveries,
    #: their stores cleared, and rebuilt from the canonical store when read
    #: again (0: never). Applied by ``tidings reclassify``; notification feeds
    #: (whose seen/read state only their store holds) are never idle.
    inactive_days: float = Field(default=30.0, ge=0, le=3650)
    #: Followers read within this many hours are delivered first (Celery's
    #: ``tidings.high`` queue); the others go to ``tidings.low``.
    recent_read_hours: float = Field(default=24.0, gt=0, le=8760)
    #: ``tidings serve``: a connection idle this long after a response is closed.
    http_keepalive_seconds: float = Field(default=5.0, ge=0.1, le=3600)
    #: ``tidings serve``: a connection that has not sent a complete request
    #: header this long after it opened (or after the first byte following a
    #: response) is closed, so half-sent requests cannot hold sockets forever.
    http_header_timeout_seconds: float = Field(default=10.0, ge=0.1, le=3600)
    #: ``tidings serve``, per worker: a request arriving while this many
    #: connections are open (its own included) or requests in progress is
    #: answered 503.
    http_max_connections: int = Field(default=1000, ge=1, le=1_000_000)
    #: ``tidings serve``: the request line and headers of a request, in all,
    #: may be at most this many bytes; a longer one is answered 431 and its
    #: connection closed as the bytes arrive, before they are held or parsed.
    http_max_header_bytes: int = Field(default=65_536, ge=1024, le=16 * 1024 * 1024)
    #: ``tidings serve``: on SIGTERM (or Ctrl-C), live streams are ended at once
    #: and requests in progress get this long to finish before they are
    #: cancelled and the worker exits.
    http_shutdown_timeout_seconds: float = Field(default=10.0, ge=0.1, le=3600)

    #: Live events: how long a watched feed's events are kept for a client that
    #: reconnects (``Last-Event-ID``); on Redis when ``redis_url`` is set,
    #: else in this process.
    events_retention_seconds: float = Field(default=86_400.0, ge=1, le=30 * 86_400)
    #: Events a live connection may have unread before it is cut off (a feed
    #: subscription, which then resumes by id) or told what it missed (firehose).
    events_buffer: int = Field(default=1000, ge=10, le=1_000_000)
    #: SSE: a comment line this often keeps idle connections open through proxies.
    sse_heartbeat_seconds: float = Field(default=15.0, gt=0, le=3600)
    #: Live connections (SSE streams and WebSockets) one user token's subject
    #: may hold open at once, counted per worker process; beyond it, SSE is
    #: answered 429 and a WebSocket handshake 429 too. Server tokens are not
    #: counted.
    live_connections_per_user: int = Field(default=20, ge=1, le=100_000)
    #: Feeds one WebSocket may be subscribed to at once; a subscribe beyond
    #: it is answered with an error message.
    websocket_max_feeds: int = Field(default=100, ge=1, le=100_000)
    #: Firehoses one WebSocket may have open at once (each one is matched
    #: against every activity published).
    websocket_max_firehoses: int = Field(default=1, ge=0, le=100)

    #: Reaction kinds held once per user per activity (or parent): adding one
    #: again returns the one held.
    unique_reactions: frozenset[str] = frozenset({"like"})
    #: ``latest_reactions`` of a page: the newest this many of each kind.
    latest_reactions: int = Field(default=5, ge=1, le=MAX_LATEST)
    #: The group of users' own (profile) feeds: ranking's ``affinity`` counts
    #: a follow of ``<profile_group>:<actor>`` by the feed read.
    profile_group: str = Field(default="user", pattern=r"^[a-z][a-z0-9_]{0,31}$")

    #: Users' home feeds: a user's ``following`` counts the follows of
    #: ``<home_group>:<id>`` (its ``followers``, those of ``<profile_group>:<id>``).
    home_group: str = Field(default="timeline", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    #: Handles nobody may claim (compared as normalised: NFKC, case-folded).
    reserved_handles: frozenset[str] = frozenset(
        {"admin", "administrator", "api", "help", "root", "support", "system", "tidings", "www"}
    )
    #: How long a handle given up (renamed away from, or its user deleted) keeps
    #: resolving to its user, and stays theirs.
    handle_keep_seconds: float = Field(default=30 * 86_400.0, ge=0, le=3650 * 86_400)
    #: How long a user's mutes, blocks and filters are kept in a process after
    #: reading them (a change made in the same process applies at once; other
    #: processes see it within this).
    rules_cache_seconds: float = Field(default=2.0, ge=0, le=3600)
    #: Object types user tokens may write over HTTP (others need a server token).
    user_object_types: frozenset[str] = frozenset()

    #: Serve the web app at ``/`` (``tidings serve --app``; ``tidings demo`` does).
    web_app: bool = False
    #: The web app's sign-in page mints a user token for whichever user is
    #: picked: a development convenience (``tidings demo``, ``serve --app
    #: --dev``), never production, where people paste a token their
    #: application minted (``tidings token``).
    web_app_dev_sign_in: bool = False
    #: Host names (or addresses), besides localhost, 127.0.0.1, [::1] and the
    #: address served on, under which the development sign-in mints tokens
    #: (any port). A page of another site that rebinds its name to this
    #: machine reaches the server under that name, and is refused.
    web_app_hosts: frozenset[str] = frozenset()
    #: Users the sign-in page offers, comma-separated ids (the demo names its own).
    web_app_users: str = Field(default="", max_length=4000, pattern=r"^[A-Za-z0-9_.@=+,-]*$")

    #: getstream Activity Feeds v2 clients served under ``/api/v1.0/`` (off
    #: while empty): each API key with its secret and the feed groups its
    #: clients may reach. Environment: ``TIDINGS_STREAM_KEYS`` as JSON, e.g.
    #: ``[{"key": "k", "secret": "...", "groups": ["user", "timeline"]}]``.
    stream_keys: tuple[StreamKey, ...] = Field(default=(), max_length=MAX_STREAM_KEYS)

    @field_validator("unique_reactions", mode="after")
    @classmethod
    def _check_kinds(cls, value: frozenset[str]) -> frozenset[str]:
        for kind in value:
            check_kind(kind, "unique_reactions")
        return value

    @field_validator("web_app_hosts", mode="after")
    @classmethod
    def _check_hosts(cls, value: frozenset[str]) -> frozenset[str]:
        hosts = frozenset(h.lower().strip("[]") for h in value)
        for host in hosts:
            if not _HOST.fullmatch(host):
                raise ValueError(
                    f"web_app_hosts: {host[:64]!r} is not a host name or address "
                    "(no scheme, no port)"
                )
        return hosts

    @field_validator("groups", mode="after")
    @classmethod
    def _merge_groups(cls, value: dict[str, FeedGroup]) -> dict[str, FeedGroup]:
        merged = dict(DEFAULT_GROUPS)
        merged.update(value)
        for name in merged:
            parse_feed_id(f"{name}:x")  # group names follow the feed id rules
        return merged

    @model_validator(mode="after")
    def _check_stream_keys(self) -> Settings:
        seen: set[str] = set()
        for i, entry in enumerate(self.stream_keys):
            if entry.key in seen:
                raise ValueError(f"stream_keys.{i}.key: {entry.key!r} is given twice")
            seen.add(entry.key)
            unknown = sorted(entry.groups - set(self.groups))
            if unknown:
                raise ValueError(
                    f"stream_keys.{i}.groups: {', '.join(unknown)} not configured "
                    f"(configured groups: {', '.join(sorted(self.groups))})"
                )
        return self

    @property
    def web_app_user_ids(self) -> list[str]:
        return [u for u in self.web_app_users.split(",") if u]

    @property
    def store(self) -> StoreName:
        """The store ``timeline_store`` names, ``auto`` resolved (never ``auto``)."""
        if self.timeline_store != StoreName.AUTO:
            return self.timeline_store
        return StoreName.REDIS if self.redis_url else StoreName.SQL

    @property
    def celery_broker(self) -> str | None:
        return self.broker_url or self.redis_url

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=_config_path()),
        )

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Read settings from the environment and the TOML file; ``overrides`` win."""
        return cls(**overrides)


def _config_path() -> Path:
    # The one place tidings reads the environment outside pydantic-settings:
    # to find the file pydantic-settings should read.
    return Path(os.environ.get("TIDINGS_CONFIG", "tidings.toml"))
