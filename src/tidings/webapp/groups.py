"""Which feed groups the web app shows, taken from the settings.

The page gets these names in its config and names no group itself, so a
deployment that renames its groups keeps a working app. Home and profile
feeds are settings of their own (``home_group``, ``profile_group``); the
aggregated, ranked and notification pages have none, so they are found by kind
among ``settings.groups``: the group of the default name when it is of that
kind (``<home_group>_aggregated``, ``<home_group>_ranked``,
``notification``), else the first of that kind by name. A kind no group has
is ``None``, and the app leaves that page out.
"""

from __future__ import annotations

from tidings.core.feeds import FeedKind
from tidings.settings import Settings


def app_groups(settings: Settings) -> dict[str, str | None]:
    """The group of each feed the web app reads, by the role it plays there."""
    home = settings.home_group
    return {
        "home": home,
        "profile": settings.profile_group,
        "aggregated": _of_kind(settings, FeedKind.AGGREGATED, f"{home}_aggregated"),
        "ranked": _of_kind(settings, FeedKind.RANKED, f"{home}_ranked"),
        "notifications": _of_kind(settings, FeedKind.NOTIFICATION, "notification"),
    }


def _of_kind(settings: Settings, kind: FeedKind, preferred: str) -> str | None:
    names = sorted(name for name, group in settings.groups.items() if group.kind == kind)
    if preferred in names:
        return preferred
    return names[0] if names else None
