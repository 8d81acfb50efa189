"""Who may read a feed, for async routes: :func:`auth.check_read` (the
engine's :class:`~tidings.services.access.Access` decides), with the rules of
the feed's owner looked up off the event loop first."""

from __future__ import annotations

from tidings.core.feeds import FeedId, parse_feed_id
from tidings.engine import Tidings
from tidings.http import auth


async def check_readable(
    engine: Tidings, who: auth.Principal, feed: str, parsed: FeedId | None = None
) -> None:
    """Raise :class:`auth.Forbidden` unless ``who`` may read ``feed``. Reading
    someone else's public feed looks up the owner's rules (in a thread when
    not cached); one's own feeds, the hot path, cost nothing more."""
    fid = parse_feed_id(feed, engine.feed_groups) if parsed is None else parsed
    if not who.server and fid.key != who.subject and engine.feed_groups[fid.group].public:
        await engine.access.load_rules(fid.key)
    auth.check_read(who, feed, engine.access, parsed=fid)
