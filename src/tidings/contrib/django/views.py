"""The signed-in user's feeds as JSON: home, aggregated, notifications (with
their marks), and any feed they may read by its id.

Who may read what is decided where the HTTP API decides it
(:class:`tidings.services.access.Access`); the pages have the HTTP API's
shape (``results``, ``next``; ``unseen``/``unread`` on notification feeds).
Query values: ``limit`` (1-100, default 25), ``cursor`` (a page's ``next``),
``reactions`` (``counts,latest,own``; ``own`` is the user's) and ``enrich``
(``1``: model references as small dicts, :func:`~tidings.contrib.django.enrich.enrich_json`).
"""

from __future__ import annotations

from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, QueryDict

from tidings.contrib.django.endpoints import endpoint, json_body, json_response, refuse
from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.enrich import enrich_json
from tidings.contrib.django.refs import aggregated_feed, home_feed, notification_feed, user_key
from tidings.http.fastpath import REGENERATION_RETRY_AFTER, bool_param, int_param
from tidings.http.models import MarkIn


@endpoint("GET")
def home(request: HttpRequest, user: Any) -> HttpResponse:
    """The user's home feed (``<home_group>:<pk>``), newest first."""
    return page(home_feed(user), user, request.GET)


@endpoint("GET")
def aggregated(request: HttpRequest, user: Any) -> HttpResponse:
    """The user's aggregated home feed: aggregates, newest first."""
    return page(aggregated_feed(user), user, request.GET)


@endpoint("GET")
def notifications(request: HttpRequest, user: Any) -> HttpResponse:
    """The user's notification feed, with its ``unseen`` and ``unread`` counts.

    Reading marks nothing: marks are POSTs (``seen/``, ``read/``), so that no
    other site can make a signed-in user's browser mark them (a GET carries
    no CSRF token).
    """
    return page(notification_feed(user), user, request.GET)


@endpoint("POST")
def mark_seen(request: HttpRequest, user: Any) -> HttpResponse:
    """Mark aggregates of the user's notifications seen: ``{"groups": [keys]}``
    or ``{"all": true}``; answers the counts after."""
    return _mark(request, user, read=False)


@endpoint("POST")
def mark_read(request: HttpRequest, user: Any) -> HttpResponse:
    """Mark aggregates of the user's notifications read (and so seen)."""
    return _mark(request, user, read=True)


@endpoint("GET")
def feed(request: HttpRequest, user: Any, feed_id: str) -> HttpResponse:
    """A feed by its id (``user:7``), if the user may read it: their own feeds,
    and those of public groups whose owner does not block them."""
    refuse(get_engine().access.refusal(user_key(user), feed_id))
    return page(feed_id, user, request.GET)


def _mark(request: HttpRequest, user: Any, *, read: bool) -> HttpResponse:
    body = json_body(request, MarkIn)
    engine = get_engine()
    # Always the user's own notification feed: marks are its owner's alone.
    notices = notification_feed(user)
    marker = engine.mark_read if read else engine.mark_seen
    marker(notices, None if body.all else body.groups)
    unseen, unread = engine.notification_counts(notices)
    return json_response({"unseen": unseen, "unread": unread})


def page(feed: str, user: Any, query: QueryDict) -> HttpResponse:
    """A page of ``feed`` as ``user`` reads it, shaped as the HTTP API's (206 with
    ``Retry-After`` while the feed is rebuilt after its owner was idle)."""
    engine = get_engine()
    reader = user_key(user)
    limit = int_param(query.get("limit"), "limit", default=25)
    cursor = query.get("cursor")
    reactions = query.get("reactions")
    enrich = bool_param(query.get("enrich"), "enrich")
    body: dict[str, Any]
    if engine.reads.is_aggregated(feed):
        body, regenerating = engine.reads.aggregates_json(
            feed, limit, cursor, reactions=reactions, user=reader
        )
        activities = [a for aggregate in body["results"] for a in aggregate["activities"]]
    else:
        found = engine.reads.json(feed, limit, cursor, reactions=reactions, user=reader)
        activities = [orjson.loads(doc) for doc in found.results]
        body = {"results": activities, "next": found.next}
        if found.renewed:
            body["renewed"] = True
        regenerating = found.regenerating
    if enrich:
        enrich_json(activities)
    response = json_response(body, 206 if regenerating else 200)
    if regenerating:
        response["Retry-After"] = str(REGENERATION_RETRY_AFTER)
    return response
