"""Reactions as JSON: an activity's reactions, the signed-in user's own added
and removed.

The user sees, and reacts to, only activities they may see
(:meth:`~tidings.services.access.Access.activity_refusal`), names in ``to``
only feeds they may address (their own, ``addressable`` groups: a like
notifying the author's ``notification:<pk>``), and removes only their own
reactions: the HTTP API's rules, decided in the same place.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from tidings.contrib.django.endpoints import Refused, endpoint, json_body, json_response, refuse
from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.refs import user_key
from tidings.core.reactions import check_kind
from tidings.http.fastpath import int_param
from tidings.http.models import ReactionIn


@endpoint("GET", "POST")
def reactions(request: HttpRequest, user: Any, activity_id: str) -> HttpResponse:
    """GET: the activity's reactions, newest first (``kind``, ``limit``,
    ``cursor``). POST ``{"kind": "like", "data": {}, "to": [], "parent": null}``:
    the user's reaction (201; 200 with the one held for a unique kind already added)."""
    engine = get_engine()
    me = user_key(user)
    activity = engine.get_activity(activity_id)
    refuse(engine.access.activity_refusal(activity, me))
    if request.method == "GET":
        query = request.GET
        kind = query.get("kind")
        if kind is not None:
            check_kind(kind, "kind")
        found = engine.reactions.page(
            activity.id,
            kind,
            limit=int_param(query.get("limit"), "limit", default=25),
            cursor=query.get("cursor"),
        )
        return json_response({"results": [r.to_dict() for r in found.results], "next": found.next})
    body = json_body(request, ReactionIn, user=me)
    refuse(engine.access.address_refusal(me, body.to))
    reaction, created = engine.reactions.put(
        activity.id, body.kind, me, body.data, to=body.to, parent=body.parent
    )
    engine.settle()  # its notice written before the answer: any process reads it
    return json_response(reaction.to_dict(), 201 if created else 200)


@endpoint("DELETE")
def reaction(request: HttpRequest, user: Any, reaction_id: str) -> HttpResponse:
    """Remove one of the user's own reactions, the reactions under it and their
    notifications (also where the activity's owner has blocked them since:
    one may always take back what one said)."""
    engine = get_engine()
    me = user_key(user)
    if engine.reactions.get(reaction_id).user != me:
        raise Refused(f"{me!r} may remove only their own reactions")
    engine.reactions.remove(reaction_id)
    return HttpResponse(status=204)
