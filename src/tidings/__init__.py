"""tidings: activity feeds for Python.

from tidings import Tidings
with Tidings() as feeds:
    feeds.follow("timeline:alice", "user:bob")
    feeds.add_activity("user:bob", {"actor": "bob", "verb": "post", "object": "photo:1"})
    page = feeds.read("timeline:alice")
"""

from tidings.activity import Activity, NewActivity
from tidings.canonical import Follow
from tidings.engine import Tidings
from tidings.errors import (
    ActivityNotFound,
    ConfigurationError,
    InvalidCursor,
    InvalidFeedId,
    NotFound,
    TidingsError,
    UnknownFeedGroup,
    ValidationError,
)
from tidings.feeds import FeedGroup, FeedKind
from tidings.page import Page
from tidings.settings import Settings

__all__ = [
    "Activity",
    "ActivityNotFound",
    "ConfigurationError",
    "FeedGroup",
    "FeedKind",
    "Follow",
    "InvalidCursor",
    "InvalidFeedId",
    "NewActivity",
    "NotFound",
    "Page",
    "Settings",
    "Tidings",
    "TidingsError",
    "UnknownFeedGroup",
    "ValidationError",
]
