"""Short-lived tidings tokens for the signed-in user, so a page can open their
live events on ``tidings serve`` with the JS client.

A token is what ``tidings token <user>`` prints: an HS256 JWT signed with
the ``secret`` of ``settings.TIDINGS`` (``tidings serve`` must have the same
one), its subject the user's key (:func:`~tidings.contrib.django.refs.user_key`),
so it reads that user's feeds and no one else's (and public ones), as any
user token does over HTTP.

Two Django settings beside ``TIDINGS``, which holds the engine's settings
alone (the keys of :class:`tidings.Settings`, none of which is about where a
browser reaches the service or how long a page's token lives):

* ``TIDINGS_SERVE_URL``: the base URL at which browsers reach ``tidings serve``
  (``https://live.example.com``, or ``/live`` behind the same origin), handed
  to the page with the token; None (the default) sends ``null``.
* ``TIDINGS_TOKEN_SECONDS``: how long a token lives, 1 to 86,400 (default 300).
  A live stream ends when its token expires; the JS client, given a function
  that fetches a new token, opens it again from the last event it saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse

from tidings.contrib.django.endpoints import endpoint, json_response
from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.refs import (
    aggregated_feed,
    feed_of,
    home_feed,
    notification_feed,
    user_key,
)
from tidings.http.app import MIN_SECRET_LENGTH
from tidings.http.auth import mint

DEFAULT_TOKEN_SECONDS = 300
#: A day: a page asks again long before; a leaked token is good for no longer.
MAX_TOKEN_SECONDS = 86_400


@dataclass(frozen=True)
class UserToken:
    """A user token, its subject and when it expires (Unix seconds)."""

    token: str
    user: str
    expires_at: int


def mint_token(user: Any) -> UserToken:
    """A token for ``user`` (a user instance, or a key), for ``TIDINGS_TOKEN_SECONDS``."""
    engine = get_engine()
    secret = engine.settings.secret
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        raise ImproperlyConfigured(
            f"minting tokens needs TIDINGS['secret'], the secret of tidings serve, of at "
            f"least {MIN_SECRET_LENGTH} characters (shorter HS256 keys are brute-forceable)"
        )
    ttl = token_seconds()
    subject = user_key(user)
    # Issued by the engine's clock, read once, so the expiry said is the token's.
    issued = int(engine.clock.timestamp())
    token = mint(secret, subject, ttl_seconds=ttl, now=lambda: issued)
    return UserToken(token, subject, issued + ttl)


def token_seconds() -> int:
    """``TIDINGS_TOKEN_SECONDS``, checked."""
    value = getattr(django_settings, "TIDINGS_TOKEN_SECONDS", DEFAULT_TOKEN_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKEN_SECONDS:
        raise ImproperlyConfigured(
            f"TIDINGS_TOKEN_SECONDS must be an integer from 1 to {MAX_TOKEN_SECONDS}, got {value!r}"
        )
    return value


@endpoint("POST")
def token(request: HttpRequest, user: Any) -> HttpResponse:
    """A new token for the signed-in user: ``token``, ``expires_at`` (ISO-8601),
    ``expires_in`` (seconds), ``url`` (``TIDINGS_SERVE_URL``), ``user`` (the
    token's subject) and ``feeds`` (the ids of the user's feeds, by role).

    POST, not GET: a credential is never cached (by the browser or a proxy)
    nor logged in a URL, and the CSRF check lets only the site's own pages
    ask for one.
    """
    made = mint_token(user)
    return json_response(
        {
            "token": made.token,
            "expires_at": datetime.fromtimestamp(made.expires_at, UTC),
            "expires_in": token_seconds(),
            "url": getattr(django_settings, "TIDINGS_SERVE_URL", None),
            "user": made.user,
            "feeds": {
                "home": home_feed(user),
                "aggregated": aggregated_feed(user),
                "notifications": notification_feed(user),
                "profile": feed_of(user),
            },
        }
    )
