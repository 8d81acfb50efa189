"""The paths Stream's JS client (``getstream`` on npm) calls where stream-python
calls others, for the same work: a user-token client reads through
``enrich/feed/`` (it enriches by default), and follows through
``following/`` where stream-python says ``follows/``."""

from __future__ import annotations

from starlette.routing import Route

from tidings.http.getstream import feeds, follows
from tidings.http.getstream.endpoint import endpoint

_FEED = "/feed/{slug}/{user_id}"

ROUTES = [
    Route("/enrich/feed/{slug}/{user_id}/", endpoint("feed", "read", feeds.read), methods=["GET"]),
    Route(f"{_FEED}/following/", endpoint("follower", "write", follows.follow), methods=["POST"]),
    Route(f"{_FEED}/following/", endpoint("follower", "read", follows.following), methods=["GET"]),
    Route(
        f"{_FEED}/following/{{target}}/",
        endpoint("follower", "delete", follows.unfollow),
        methods=["DELETE"],
    ),
]
