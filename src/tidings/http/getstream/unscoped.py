"""Routes of the calls that name no one feed in their path (activities by
identity, follows and adds over many feeds, follow counts): each needs a
server token for every feed (``activity_to_targets`` names its feed)."""

from __future__ import annotations

from starlette.routing import Route

from tidings.http.getstream import activities, batch, targets
from tidings.http.getstream.endpoint import endpoint

ROUTES = [
    Route("/activities/", endpoint("activities", "read", activities.get), methods=["GET"]),
    Route("/activities/", endpoint("activities", "write", activities.replace), methods=["POST"]),
    Route("/activity/", endpoint("activities", "write", activities.update), methods=["POST"]),
    Route("/follow_many/", endpoint("follower", "write", batch.follow_many), methods=["POST"]),
    Route("/unfollow_many/", endpoint("follower", "write", batch.unfollow_many), methods=["POST"]),
    Route("/feed/add_to_many/", endpoint("feed", "write", batch.add_to_many), methods=["POST"]),
    Route(
        "/feed_targets/{slug}/{user_id}/activity_to_targets/",
        endpoint("feed_targets", "write", targets.to_targets),
        methods=["POST"],
    ),
    Route("/stats/follow/", endpoint("follower", "read", batch.follow_stats), methods=["GET"]),
]
