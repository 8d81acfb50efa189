"""``path("feeds/", include("tidings.contrib.django.urls"))``: the signed-in
user's feeds, notifications, reactions and live-event tokens, as JSON.

=====================================  ======  =====================================
``""``                                 GET     home feed
``aggregated/``                        GET     aggregated home feed
``notifications/``                     GET     notifications, ``unseen``/``unread``
``notifications/seen/``                POST    mark seen ``{"groups": [...]}`` / ``{"all": true}``
``notifications/read/``                POST    mark read (same body)
``<group>:<key>/``                     GET     a feed by id the user may read
``activities/<id>/reactions/``         GET     the activity's reactions
``activities/<id>/reactions/``         POST    react ``{"kind": "like", ...}``
``reactions/<id>/``                    DELETE  remove one's own reaction
``token/``                             POST    a token for ``tidings serve``
=====================================  ======  =====================================

The URL names are in the ``tidings`` namespace (``reverse("tidings:home")``).
"""

from __future__ import annotations

from django.urls import path

from tidings.contrib.django import reaction_views, tokens, views

app_name = "tidings"

urlpatterns = [
    path("", views.home, name="home"),
    path("aggregated/", views.aggregated, name="aggregated"),
    path("notifications/", views.notifications, name="notifications"),
    path("notifications/seen/", views.mark_seen, name="mark_seen"),
    path("notifications/read/", views.mark_read, name="mark_read"),
    path("token/", tokens.token, name="token"),
    path("activities/<str:activity_id>/reactions/", reaction_views.reactions, name="reactions"),
    path("reactions/<str:reaction_id>/", reaction_views.reaction, name="reaction"),
    # Last: any other single segment is a feed id (a bad one gets a 400 saying why).
    path("<str:feed_id>/", views.feed, name="feed"),
]
