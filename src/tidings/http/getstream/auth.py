"""Who a Stream client is, and what its token allows.

A request names its application by ``api_key`` in the query string and sends
a JWT, raw, in ``Authorization`` (with ``stream-auth-type: jwt``), signed
with HS256 over that key's secret. Two kinds of token:

- a server token (claims ``resource``, ``action``, ``feed_id`` as slug and
  id without the colon, optionally ``user_id``; ``*`` matches anything)
  allows exactly what its claims name;
- a user token (claim ``user_id`` and no ``resource``) acts as that user,
  under the rules tidings' own user tokens follow (:mod:`tidings.http.auth`):
  its own feeds only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import jwt

from tidings.http.auth import Principal
from tidings.http.getstream.errors import Code, StreamError
from tidings.settings import StreamKey

_ALGORITHM = "HS256"
_MAX_TOKEN_LENGTH = 8192
#: Times are checked here, against the engine's clock, not PyJWT's.
_OPTIONS: jwt.types.Options = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}


@dataclass(frozen=True, slots=True)
class Grant:
    """What a verified token allows: a server token's claims, or a user's id."""

    key: StreamKey
    user_id: str | None
    resource: str | None = None
    action: str | None = None
    feed_id: str | None = None

    @property
    def server(self) -> bool:
        return self.resource is not None

    def principal(self) -> Principal:
        """The tidings principal the engine's access rules judge this token as."""
        if self.server:
            return Principal(subject="*", server=True)
        assert self.user_id is not None  # (a user token has one: see authenticate)
        return Principal(subject=self.user_id, server=False)

    def check(self, resource: str, action: str, slug: str, user_id: str) -> None:
        """Raise unless this token may do ``action`` on ``resource`` of feed ``slug:user_id``."""
        if slug not in self.key.groups:
            raise StreamError(
                Code.FEED_CONFIG,
                f"feed group {slug!r} is not configured for this api key "
                f"(its groups: {', '.join(sorted(self.key.groups))})",
            )
        if not self.server:
            if user_id != self.user_id:
                raise StreamError(
                    Code.NOT_ALLOWED,
                    f"a user token for {self.user_id!r} may only reach its own feeds, "
                    f"not {slug}:{user_id}",
                )
            return
        wanted = {"resource": resource, "action": action, "feed_id": f"{slug}{user_id}"}
        for claim, value in wanted.items():
            granted = getattr(self, claim)
            if granted not in ("*", value):
                raise StreamError(
                    Code.NOT_ALLOWED,
                    f"the token's {claim} claim is {granted!r}; this needs {value!r} (or '*')",
                )

    def check_all(self, resource: str, action: str) -> None:
        """Raise unless this is a server token for ``action`` on ``resource`` of
        every feed (``feed_id`` ``*``): what calls naming no one feed need."""
        if not self.server:
            raise StreamError(
                Code.NOT_ALLOWED, f"{resource} calls that name no feed need a server token"
            )
        wanted = {"resource": resource, "action": action, "feed_id": "*"}
        for claim, value in wanted.items():
            granted = getattr(self, claim)
            if granted not in ("*", value):
                raise StreamError(
                    Code.NOT_ALLOWED,
                    f"the token's {claim} claim is {granted!r}; this needs {value!r} (or '*')",
                )


def authenticate(
    keys: Mapping[str, StreamKey],
    query: Mapping[str, str],
    headers: Mapping[str, str],
    now: Callable[[], float],
) -> Grant:
    """The grant of a request's token, or the Stream error a client expects."""
    key, token = _credentials(keys, query, headers)
    return _verify(key, token, now)[0]


class GrantCache:
    """:func:`authenticate`, remembering the tokens it verified until they expire.

    A client sends the same token on every request, and a token is an
    immutable string: once its signature is checked it stays good until its
    ``exp``. Checking it again (base64, HMAC, JSON) took ~80 us a request on
    the bench machine, a twentieth of a page read's time in the server. Kept by key and token, since a token is verified against its
    key's secret. Bounded: when full it starts over, which costs one
    verification per token in use.
    """

    def __init__(self, keys: Mapping[str, StreamKey], size: int = 10_000) -> None:
        self.keys = keys
        self.size = size
        self._known: dict[tuple[str, str], tuple[Grant, float | None]] = {}

    def authenticate(
        self, query: Mapping[str, str], headers: Mapping[str, str], now: Callable[[], float]
    ) -> Grant:
        key, token = _credentials(self.keys, query, headers)
        hit = self._known.get((key.key, token))
        if hit is not None and (hit[1] is None or hit[1] > now()):
            return hit[0]
        grant, expires = _verify(key, token, now)  # (raises for an expired one)
        if len(self._known) >= self.size:
            self._known.clear()
        self._known[key.key, token] = (grant, expires)
        return grant


def _credentials(
    keys: Mapping[str, StreamKey], query: Mapping[str, str], headers: Mapping[str, str]
) -> tuple[StreamKey, str]:
    """The api key a request names and the token it sends (not yet verified)."""
    api_key = query.get("api_key")
    key = keys.get(api_key) if api_key else None
    if key is None:
        detail = "api_key is missing" if not api_key else f"unknown api_key {api_key[:64]!r}"
        raise StreamError(Code.API_KEY, detail)
    token = headers.get("authorization")
    if not token:
        raise StreamError(Code.NOT_ALLOWED, "the Authorization header (a JWT) is missing")
    if headers.get("stream-auth-type", "jwt").lower() != "jwt":
        raise StreamError(Code.NOT_ALLOWED, "stream-auth-type must be jwt")
    if len(token) > _MAX_TOKEN_LENGTH:
        raise StreamError(Code.SIGNATURE, f"token is over {_MAX_TOKEN_LENGTH:,} characters")
    if token.lower().startswith("bearer "):
        token = token[7:]
    return key, token


def _verify(key: StreamKey, token: str, now: Callable[[], float]) -> tuple[Grant, float | None]:
    """The grant of ``token`` under ``key``, and when it expires (None: never)."""
    try:
        claims = jwt.decode(token, key.secret, algorithms=[_ALGORITHM], options=_OPTIONS)
    except jwt.InvalidSignatureError:
        raise StreamError(Code.SIGNATURE, "the token's signature does not match") from None
    except jwt.InvalidTokenError as exc:
        raise StreamError(Code.SIGNATURE, f"the token is not a valid JWT: {exc}") from None
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or isinstance(expires, bool):
        expires = None
    elif expires <= now():
        raise StreamError(Code.SIGNATURE, "the token has expired")
    return _grant(key, claims), expires


def _grant(key: StreamKey, claims: Mapping[str, object]) -> Grant:
    user_id = claims.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        raise StreamError(Code.SIGNATURE, "the token's user_id claim must be a string")
    if "resource" not in claims:
        if not user_id or user_id == "*":
            raise StreamError(
                Code.NOT_ALLOWED, "the token names neither a resource nor a user (user_id)"
            )
        return Grant(key, user_id)
    names = ("resource", "action", "feed_id")
    values = [claims.get(name, "*") for name in names]
    for name, value in zip(names, values, strict=True):
        if not isinstance(value, str):
            raise StreamError(Code.SIGNATURE, f"the token's {name} claim must be a string")
    resource, action, feed_id = (str(v) for v in values)
    return Grant(key, user_id, resource, action, feed_id)
