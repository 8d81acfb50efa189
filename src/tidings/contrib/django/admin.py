"""Admin pages that show what an instance of a model registered with
:func:`~tidings.contrib.django.publishes` published: the activity fetched by
its ``foreign_id`` (``app_label.model_name:pk``) from the feed it went to.

Register a model with :class:`PublishedAdmin` (a read-only page), or add
:class:`PublishedActivityMixin` to its own ``ModelAdmin``::

    admin.site.register(Post, PublishedAdmin)
"""

from __future__ import annotations

from typing import Any

import orjson
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.publishing import activity_of
from tidings.core.errors import NotFound

#: The activity's fields the page shows, in this order.
SHOWN = ("id", "actor", "verb", "object", "target", "time", "to", "extra")


class PublishedActivityMixin:
    """A ``ModelAdmin`` mixin: the change (or view) page shows, read-only, the
    activity the instance published, or says it has published none."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = super().get_readonly_fields(request, obj)  # type: ignore[misc]
        return (*fields, "tidings_activity")

    @admin.display(description="tidings activity")  # type: ignore[untyped-decorator]
    def tidings_activity(self, obj: Any) -> SafeString | str:
        if obj is None or obj.pk is None:
            return "-"
        feed, made = activity_of(obj)
        try:
            activity = get_engine().get_activity((feed, made["foreign_id"]))
        except NotFound:
            # when() is false for it, it was saved in a transaction not yet
            # committed, or it was written without signals (publish() says so).
            return f"none in {feed} (foreign_id {made['foreign_id']})"
        found = orjson.loads(activity.to_json())  # as the API shows it (time in ISO-8601)
        rows = [("feed", feed), *((name, _text(found.get(name))) for name in SHOWN)]
        body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
        return format_html("<table>{}</table>", body)


class PublishedAdmin(PublishedActivityMixin, admin.ModelAdmin):  # type: ignore[misc]
    """A read-only admin of a publishing model: its instances, each page with its activity."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()
