"""Every route of the service as a :class:`~tidings_client._core.Call`: its
method, path, query, body, result type, and whether it may be retried.

Both clients turn these into requests; this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tidings_client._core import (
    Call,
    dumps,
    feed_path,
    json_result,
    no_result,
    query,
    segment,
    text_result,
)
from tidings_client.types import (
    JSON,
    Activity,
    ActivityIn,
    AggregatePage,
    BatchResult,
    Block,
    Counts,
    Filter,
    FollowBatchResult,
    FollowPage,
    FollowResult,
    Health,
    Mute,
    Page,
    Reaction,
    ReactionPage,
    Stats,
    StoredObject,
    User,
)

AS2_MEDIA_TYPE = "application/activity+json"


# -- reading feeds -----------------------------------------------------------------------------


def read(
    feed: str,
    limit: int | None,
    cursor: str | None,
    reactions: str | None,
    user: str | None,
    explain: bool,
    enrich: bool,
    fields: str | None,
) -> Call[Page]:
    params = query(
        limit=limit,
        cursor=cursor,
        reactions=reactions,
        user=user,
        explain=explain,
        enrich=enrich,
        fields=fields,
    )
    return Call("GET", feed_path(feed), json_result, params, idempotent=True)


def read_aggregates(
    feed: str,
    limit: int | None,
    cursor: str | None,
    reactions: str | None,
    user: str | None,
    enrich: bool,
    fields: str | None,
    mark_seen: bool,
) -> Call[AggregatePage]:
    params = query(
        limit=limit,
        cursor=cursor,
        reactions=reactions,
        user=user,
        enrich=enrich,
        fields=fields,
        mark_seen=mark_seen,
    )
    # mark_seen writes, but marking the same groups seen twice is marking them once.
    return Call("GET", feed_path(feed), json_result, params, idempotent=True)


def read_as2(feed: str, limit: int | None, cursor: str | None) -> Call[JSON]:
    params = query(limit=limit, cursor=cursor, format="as2")
    headers = {"accept": AS2_MEDIA_TYPE}
    return Call("GET", feed_path(feed), json_result, params, idempotent=True, headers=headers)


def mark(feed: str, aggregates: Sequence[str] | None, read: bool) -> Call[Counts]:
    # (The JSON field keeps its first name, "groups".)
    body: dict[str, Any] = {"all": True} if aggregates is None else {"groups": list(aggregates)}
    path = f"{feed_path(feed)}/{'read' if read else 'seen'}"
    return Call("POST", path, json_result, body=dumps(body))


# -- activities --------------------------------------------------------------------------------


def publish(feed: str, activity: ActivityIn) -> Call[Activity]:
    # A repeated foreign_id returns the stored activity (200): sending the
    # publish again cannot store it twice.
    again = bool(activity.get("foreign_id"))
    path = f"{feed_path(feed)}/activities"
    return Call("POST", path, json_result, body=dumps(activity), idempotent=again)


def publish_batch(feed: str, activities: Sequence[ActivityIn]) -> Call[BatchResult]:
    again = bool(activities) and all(a.get("foreign_id") for a in activities)
    body = dumps({"activities": list(activities)})
    path = f"{feed_path(feed)}/activities:batch"
    return Call("POST", path, json_result, body=body, idempotent=again)


def get_by_foreign_id(feed: str, foreign_id: str) -> Call[Activity]:
    params = {"foreign_id": foreign_id}
    return Call("GET", f"{feed_path(feed)}/activities", json_result, params, idempotent=True)


def get_activity(activity_id: str, enrich: bool, fields: str | None) -> Call[Activity]:
    params = query(enrich=enrich, fields=fields)
    path = f"/v1/activities/{segment(activity_id)}"
    return Call("GET", path, json_result, params, idempotent=True)


def update_activity(
    activity_id: str, set: JSON | None, unset: Iterable[str] | None
) -> Call[Activity]:
    body = dumps({"set": set or {}, "unset": list(unset or ())})
    return Call("PATCH", f"/v1/activities/{segment(activity_id)}", json_result, body=body)


def remove_activity(feed: str, activity_id: str) -> Call[None]:
    path = f"{feed_path(feed)}/activities/{segment(activity_id)}"
    return Call("DELETE", path, no_result)


def remove_by_foreign_id(feed: str, foreign_id: str) -> Call[None]:
    params = {"foreign_id": foreign_id}
    return Call("DELETE", f"{feed_path(feed)}/activities", no_result, params)


# -- follows -----------------------------------------------------------------------------------


def follow(follower: str, source: str, copy_limit: int | None) -> Call[FollowResult]:
    body = dumps({"source": source} | ({} if copy_limit is None else {"copy_limit": copy_limit}))
    return Call("POST", f"{feed_path(follower)}/follows", json_result, body=body)


def unfollow(follower: str, source: str, keep_history: bool) -> Call[None]:
    path = f"{feed_path(follower)}/follows/{segment(source)}"
    return Call("DELETE", path, no_result, query(keep_history=keep_history))


def follow_many(
    pairs: Iterable[tuple[str, str]], copy_limit: int | None
) -> Call[FollowBatchResult]:
    body: dict[str, Any] = {"follows": [{"follower": f, "source": s} for f, s in pairs]}
    if copy_limit is not None:
        body["copy_limit"] = copy_limit
    return Call("POST", "/v1/follows:batch", json_result, body=dumps(body))


def follow_page(feed: str, kind: str, limit: int | None, cursor: str | None) -> Call[FollowPage]:
    params = query(limit=limit, cursor=cursor)
    return Call("GET", f"{feed_path(feed)}/{kind}", json_result, params, idempotent=True)


# -- reactions ---------------------------------------------------------------------------------


def add_reaction(
    activity_id: str,
    kind: str,
    user: str,
    data: JSON | None,
    to: Sequence[str],
    parent: str | None,
) -> Call[Reaction]:
    body: dict[str, Any] = {"kind": kind, "user": user, "data": data or {}, "to": list(to)}
    if parent is not None:
        body["parent"] = parent
    path = f"/v1/activities/{segment(activity_id)}/reactions"
    return Call("POST", path, json_result, body=dumps(body))


def reactions(
    path: str, kind: str | None, limit: int | None, cursor: str | None
) -> Call[ReactionPage]:
    params = query(kind=kind, limit=limit, cursor=cursor)
    return Call("GET", path, json_result, params, idempotent=True)


def activity_reactions(
    activity_id: str, kind: str | None, limit: int | None, cursor: str | None
) -> Call[ReactionPage]:
    return reactions(f"/v1/activities/{segment(activity_id)}/reactions", kind, limit, cursor)


def reaction_children(
    reaction_id: str, kind: str | None, limit: int | None, cursor: str | None
) -> Call[ReactionPage]:
    return reactions(f"/v1/reactions/{segment(reaction_id)}/children", kind, limit, cursor)


def get_reaction(reaction_id: str) -> Call[Reaction]:
    path = f"/v1/reactions/{segment(reaction_id)}"
    return Call("GET", path, json_result, idempotent=True)


def update_reaction(reaction_id: str, data: JSON) -> Call[Reaction]:
    path = f"/v1/reactions/{segment(reaction_id)}"
    return Call("PATCH", path, json_result, body=dumps({"data": data}))


def remove_reaction(reaction_id: str, soft: bool) -> Call[None]:
    path = f"/v1/reactions/{segment(reaction_id)}"
    return Call("DELETE", path, no_result, query(soft=soft))


def restore_reaction(reaction_id: str) -> Call[Reaction]:
    return Call("POST", f"/v1/reactions/{segment(reaction_id)}/restore", json_result)


# -- users, objects, stats ---------------------------------------------------------------------


def create_user(user_id: str, handle: str, profile: JSON | None) -> Call[User]:
    body = dumps({"id": user_id, "handle": handle, "profile": profile or {}})
    return Call("POST", "/v1/users", json_result, body=body)


def get_user(user_id: str) -> Call[User]:
    return Call("GET", f"/v1/users/{segment(user_id)}", json_result, idempotent=True)


def user_by_handle(handle: str) -> Call[User]:
    path = f"/v1/users/by-handle/{segment(handle)}"
    return Call("GET", path, json_result, idempotent=True)


def update_user(user_id: str, handle: str | None, profile: JSON | None) -> Call[User]:
    body: dict[str, Any] = {}
    if handle is not None:
        body["handle"] = handle
    if profile is not None:
        body["profile"] = profile
    return Call("PATCH", f"/v1/users/{segment(user_id)}", json_result, body=dumps(body))


def delete_user(user_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/users/{segment(user_id)}", no_result)


def feed_stats(feed: str) -> Call[Stats]:
    return Call("GET", f"{feed_path(feed)}/stats", json_result, idempotent=True)


def _object_path(kind: str, object_id: str) -> str:
    return f"/v1/objects/{segment(kind)}/{segment(object_id)}"


def put_object(kind: str, object_id: str, data: JSON) -> Call[StoredObject]:
    body = dumps({"data": data})
    return Call("PUT", _object_path(kind, object_id), json_result, body=body)


def get_object(kind: str, object_id: str) -> Call[StoredObject]:
    return Call("GET", _object_path(kind, object_id), json_result, idempotent=True)


def delete_object(kind: str, object_id: str) -> Call[None]:
    return Call("DELETE", _object_path(kind, object_id), no_result)


# -- rules -------------------------------------------------------------------------------------


def _rules(user_id: str, kind: str) -> str:
    return f"/v1/users/{segment(user_id)}/{kind}"


def _results(content: bytes) -> Any:
    return json_result(content)["results"]


def mute(user_id: str, target: str, duration_s: int | None, notifications: bool) -> Call[Mute]:
    body = {"target": target, "duration_s": duration_s, "notifications": notifications}
    return Call("POST", _rules(user_id, "mutes"), json_result, body=dumps(body))


def rule_list(user_id: str, kind: str) -> Call[Any]:
    return Call("GET", _rules(user_id, kind), _results, idempotent=True)


def rule_delete(user_id: str, kind: str, name: str) -> Call[None]:
    return Call("DELETE", f"{_rules(user_id, kind)}/{segment(name)}", no_result)


def block(user_id: str, target: str) -> Call[Block]:
    return Call("POST", _rules(user_id, "blocks"), json_result, body=dumps({"target": target}))


def add_filter(
    user_id: str,
    keywords: Sequence[str],
    whole_word: bool,
    contexts: Sequence[str] | None,
    duration_s: int | None,
) -> Call[Filter]:
    body: dict[str, Any] = {"keywords": list(keywords), "whole_word": whole_word}
    if contexts is not None:
        body["contexts"] = list(contexts)
    if duration_s is not None:
        body["duration_s"] = duration_s
    return Call("POST", _rules(user_id, "filters"), json_result, body=dumps(body))


# -- operations --------------------------------------------------------------------------------


def health() -> Call[Health]:
    return Call("GET", "/healthz", json_result, idempotent=True)


def metrics() -> Call[str]:
    return Call("GET", "/metrics", text_result, idempotent=True)


# -- live streams ------------------------------------------------------------------------------


def events_path(feed: str) -> str:
    return f"{feed_path(feed)}/events"


def events_params(enrich: bool, fields: str | None) -> dict[str, str]:
    return query(enrich=enrich, fields=fields)


def firehose_params(
    track: str | Sequence[str] | None,
    follow: str | Sequence[str] | None,
    locations: str | Sequence[str] | None,
    sample: float | None,
) -> dict[str, str]:
    """The firehose's filters, lists joined by commas as the route reads them."""

    def joined(value: str | Sequence[str] | None) -> str | None:
        return value if value is None or isinstance(value, str) else ",".join(value)

    return query(
        track=joined(track),
        follow=joined(follow),
        locations=joined(locations),
        sample=None if sample is None else str(sample),
    )
