"""tidings: activity feeds for Python.

from tidings import Tidings
with Tidings() as feeds:
    feeds.follow("timeline:alice", "user:bob")
    feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "photo:1"})
    page = feeds.read("timeline:alice")
"""

from tidings.core.activity import Activity, NewActivity
from tidings.core.errors import (
    ActivityNotFound,
    ConfigurationError,
    CursorExpired,
    InvalidCursor,
    InvalidFeedId,
    NotFound,
    TidingsError,
    UnknownFeedGroup,
    ValidationError,
)
from tidings.core.feeds import FeedGroup, FeedKind
from tidings.core.ranking import RankingExpressionError
from tidings.core.reactions import Reaction, ReactionNotFound
from tidings.core.results import Follow, Page
from tidings.engine import Tidings
from tidings.settings import Settings, SqliteSynchronous, StoreName

__all__ = [
    "Activity",
    "ActivityNotFound",
    "ConfigurationError",
    "CursorExpired",
    "FeedGroup",
    "FeedKind",
    "Follow",
    "InvalidCursor",
    "InvalidFeedId",
    "NewActivity",
    "NotFound",
    "Page",
    "RankingExpressionError",
    "Reaction",
    "ReactionNotFound",
    "Settings",
    "SqliteSynchronous",
    "StoreName",
    "Tidings",
    "TidingsError",
    "UnknownFeedGroup",
    "ValidationError",
]
