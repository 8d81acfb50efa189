"""Tokens and who may do what.

Tokens are JWTs signed with HS256 and the server secret. A server token
(``{"sub": "*", "scope": "server"}``) may do everything. A user token
(``{"sub": "<user>"}``) acts for that user: it reads feeds keyed by the user
(or of a ``public`` group), publishes only as itself into its own feeds,
addresses in ``to`` only its own feeds and those of ``addressable`` groups,
and follows only from its own feeds and only sources it may read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import jwt
from jwt.types import Options

from tidings.core.clock import Clock
from tidings.core.feeds import FeedId, parse_feed_id
from tidings.services.access import Access

ALGORITHM = "HS256"
#: Times claims are read against (seconds since the epoch): the engine's
#: clock where there is one (``feeds.clock.timestamp``).
Now = Callable[[], float]
_REAL = Clock()
#: PyJWT reads the time itself: the time claims are checked here instead.
_DECODE_OPTIONS: Options = {
    "require": ["sub"],
    "verify_exp": False,
    "verify_iat": False,
    "verify_nbf": False,
}


class Unauthenticated(Exception):
    """No usable token: missing, malformed, expired or wrongly signed (401)."""


class Forbidden(Exception):
    """A valid token that may not do this (403)."""


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    server: bool
    #: When the token stops being valid (Unix seconds); inf without ``exp``.
    expires_at: float = float("inf")
    #: Scopes granted beyond the subject's own feeds (``firehose``).
    scopes: frozenset[str] = frozenset()

    @property
    def firehose(self) -> bool:
        """May read the firehose: a server token, or one with scope ``firehose``."""
        return self.server or "firehose" in self.scopes

    def owns(self, feed: str) -> bool:
        return self.server or parse_feed_id(feed).key == self.subject


def mint(
    secret: str,
    subject: str,
    *,
    server: bool = False,
    ttl_seconds: int | None = None,
    scopes: Iterable[str] = (),
    now: Now = _REAL.timestamp,
) -> str:
    issued = int(now())
    claims: dict[str, object] = {"sub": "*" if server else subject, "iat": issued}
    granted = ["server"] if server else list(scopes)
    if granted:
        claims["scope"] = " ".join(granted)
    if ttl_seconds is not None:
        claims["exp"] = issued + ttl_seconds
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify(secret: str, authorization: str | None, now: Now = _REAL.timestamp) -> Principal:
    if not authorization:
        raise Unauthenticated("missing Authorization header: send 'Bearer <token>'")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("Authorization header must be 'Bearer <token>'")
    try:
        claims = jwt.decode(token.strip(), secret, algorithms=[ALGORITHM], options=_DECODE_OPTIONS)
    except jwt.InvalidSignatureError:
        raise Unauthenticated("token signature is invalid") from None
    except jwt.PyJWTError as exc:
        raise Unauthenticated(f"token is invalid: {exc}") from None
    except OverflowError:
        # A time claim beyond what a float holds (10**400), should PyJWT
        # convert one itself.
        raise Unauthenticated("token is invalid: a time claim is out of range") from None
    expires_at = _check_times(claims, now())
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise Unauthenticated("token subject must be a non-empty string")
    scope = claims.get("scope")
    scopes = set(scope.split()) if isinstance(scope, str) else set()
    server = subject == "*" and "server" in scopes
    if subject == "*" and not server:
        raise Unauthenticated("token subject '*' requires scope 'server'")
    return Principal(subject, server, expires_at, frozenset(scopes - {"server"}))


def _check_times(claims: Mapping[str, object], now: float) -> float:
    """When the token expires; raises unless issued (``iat``) and valid from
    (``nbf``) by ``now`` and not expired, as PyJWT would against its own clock."""
    for claim, name in (("iat", "Issued At"), ("nbf", "Not Before")):
        if claim not in claims:
            continue
        try:
            value = int(claims[claim])  # type: ignore[call-overload]
        except (ValueError, TypeError, OverflowError):
            raise Unauthenticated(
                f"token is invalid: {name} claim ({claim}) must be an integer."
            ) from None
        if value > now:
            raise Unauthenticated(f"token is invalid: The token is not yet valid ({claim})")
    exp = claims.get("exp", float("inf"))
    # PyJWT accepts a numeric string (and a boolean) as exp; the token cache
    # compares expires_at with the clock, so anything but a number is refused
    # rather than guessed at (a string once read as "no expiry" lived forever).
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise Unauthenticated("token claim exp must be a number (seconds since the epoch)")
    try:
        expires_at = float(exp)
    except OverflowError:  # an int of hundreds of digits: no time a float can hold
        raise Unauthenticated(
            "token claim exp is out of range: at most 1.8e308 seconds since the epoch"
        ) from None
    if expires_at <= now:
        raise Unauthenticated("token has expired")
    return expires_at


class TokenCache:
    """Verified tokens, remembered until they expire.

    Clients send the same token on every request; checking its signature
    again each time is most of the cost of authentication. Bounded: when
    full it starts over, which costs one verification per token.
    """

    def __init__(self, secret: str, size: int = 10_000, now: Now = _REAL.timestamp) -> None:
        self.secret = secret
        self.size = size
        self.now = now
        self._known: dict[str, Principal] = {}

    def verify(self, authorization: str | None) -> Principal:
        if authorization is not None:
            hit = self._known.get(authorization)
            if hit is not None and hit.expires_at > self.now():
                return hit
        principal = verify(self.secret, authorization, self.now)
        if len(self._known) >= self.size:
            self._known.clear()
        self._known[str(authorization)] = principal
        return principal


def check_read(
    principal: Principal, feed: str, access: Access, *, parsed: FeedId | None = None
) -> None:
    """Raise :class:`Forbidden` unless ``principal`` may read ``feed``: a server
    token reads anything; a user token what :meth:`Access.refusal` allows
    (its own feeds, and public ones whose owner does not block it)."""
    if principal.server:
        return
    refused = access.refusal(principal.subject, feed, parsed)
    if refused is not None:
        raise Forbidden(refused)


def check_follow(principal: Principal, follower: str, source: str, access: Access) -> None:
    """A follow copies the source into the follower: a user token follows only
    from its own feeds, and only sources it may read itself."""
    check_owner(principal, follower, "follow from")
    if principal.server:
        return
    if access.refusal(principal.subject, source, blocks=False) is not None:
        raise Forbidden(
            f"a token for {principal.subject!r} may not follow {source}: a user token "
            "follows only feeds it may read (its own, and those of public groups)"
        )


def check_to(principal: Principal, to: Iterable[str], access: Access) -> None:
    """``to`` writes into other feeds: a user token names only what
    :meth:`Access.address_refusal` allows (its own feeds, ``addressable`` groups)."""
    if principal.server:
        return
    refused = access.address_refusal(principal.subject, to)
    if refused is not None:
        raise Forbidden(refused)


def check_publish(principal: Principal, feed: str, actor: object) -> None:
    if principal.server:
        return
    if not principal.owns(feed):
        raise Forbidden(f"a token for {principal.subject!r} may not add to {feed}")
    if actor != principal.subject:
        raise Forbidden(
            f"a token for {principal.subject!r} may only publish as actor {principal.subject!r}"
        )


def check_owner(principal: Principal, feed: str, action: str) -> None:
    if not principal.owns(feed):
        raise Forbidden(f"a token for {principal.subject!r} may not {action} {feed}")


def check_server(principal: Principal, action: str) -> None:
    if not principal.server:
        raise Forbidden(f"{action} needs a server token")
