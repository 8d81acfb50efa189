"""Activities and feed pages as W3C ActivityStreams 2.0 (JSON-LD).

ActivityStreams 2.0 is the vocabulary the fediverse (ActivityPub) and other
social tools read, so rendering a feed in it lets them consume tidings without
a client of their own. This module only builds the documents: plain dicts that
the HTTP layer serialises as :data:`MEDIA_TYPE`. It does no I/O.

What AS2 has a term for is rendered with that term: an activity's verb becomes
its AS2 type when AS2 has one (``like`` is a ``Like``), the actor, object,
target and feeds become IRIs under ``base_url`` (or embedded ``Person``,
``Object`` and ``Tombstone`` objects once enriched), the time is
``published``. What AS2 has no term for (the verb itself, ``foreign_id``,
``extra``, ranking scores, reactions) keeps its tidings name, declared in an
inline context as a term of our namespace :data:`TIDINGS_NS`, so a JSON-LD
processor reads every key as a full IRI and none is silently dropped or left
to the AS2 context's ``"@vocab": "_:"`` (which turns unknown terms into blank
node ids). Free-form JSON (``extra``, profiles, object data, reactions) is
typed ``@json``: JSON-LD keeps it verbatim instead of reading its keys as
properties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote

AS2_CONTEXT = "https://www.w3.org/ns/activitystreams"
#: The namespace of tidings' extension terms (``tidings:score``...).
TIDINGS_NS = "https://tidings.dev/ns#"
MEDIA_TYPE = "application/activity+json"


class PageFormat(StrEnum):
    """How a feed page is written (``?format=``): tidings' JSON or an AS2 page."""

    JSON = "json"
    AS2 = "as2"


#: Every activity type of the AS2 vocabulary (Activity Vocabulary section 3.1;
#: IntransitiveActivity and Activity themselves are not verbs).
AS2_ACTIVITY_TYPES = (
    "Accept",
    "Add",
    "Announce",
    "Arrive",
    "Block",
    "Create",
    "Delete",
    "Dislike",
    "Flag",
    "Follow",
    "Ignore",
    "Invite",
    "Join",
    "Leave",
    "Like",
    "Listen",
    "Move",
    "Offer",
    "Question",
    "Read",
    "Reject",
    "Remove",
    "TentativeAccept",
    "TentativeReject",
    "Travel",
    "Undo",
    "Update",
    "View",
)

#: Verb (normalised by :func:`_verb_key`) to AS2 activity type: each type's
#: own name, and the verbs feeds commonly use for one.
VERB_TYPES: Mapping[str, str] = {
    **{name.lower(): name for name in AS2_ACTIVITY_TYPES},
    "post": "Create",
    "share": "Announce",
    "repost": "Announce",
}

#: The type of an activity whose verb AS2 has no type for.
EXTENSION_ACTIVITY_TYPE = "tidings:Activity"

# What a path segment may hold unescaped (RFC 3986 pchar less unreserved,
# which quote() always keeps): ids such as "user@example.com" or "a=b" stay
# readable, while "/", "?", "#" and "%" are escaped so an id stays one segment.
_PCHAR = "!$&'()*+,;=:@"


def context() -> list[Any]:
    """The ``@context`` of every document here: AS2, then tidings' terms.

    A new list each call: callers may add to the documents they are given.
    """
    return [
        AS2_CONTEXT,
        {
            # @json needs JSON-LD 1.1; saying so makes a 1.0 processor refuse
            # the document instead of misreading it.
            "@version": 1.1,
            "tidings": TIDINGS_NS,
            "verb": "tidings:verb",
            "foreign_id": "tidings:foreign_id",
            "score": "tidings:score",
            "object_type": "tidings:object_type",
            "extra": {"@id": "tidings:extra", "@type": "@json"},
            "explain": {"@id": "tidings:explain", "@type": "@json"},
            "reaction_counts": {"@id": "tidings:reaction_counts", "@type": "@json"},
            "latest_reactions": {"@id": "tidings:latest_reactions", "@type": "@json"},
            "own_reactions": {"@id": "tidings:own_reactions", "@type": "@json"},
            "profile": {"@id": "tidings:profile", "@type": "@json"},
            "data": {"@id": "tidings:data", "@type": "@json"},
        },
    ]


def activity_type(verb: str) -> str | None:
    """The AS2 activity type of ``verb`` (``"LIKE"`` -> ``"Like"``), or None."""
    return VERB_TYPES.get(_verb_key(verb))


def activity(doc: Mapping[str, Any], *, base_url: str) -> dict[str, Any]:
    """One tidings activity (its JSON, as read) as an AS2 activity document."""
    return {"@context": context(), **_activity(doc, base_url.rstrip("/"))}


def page(
    docs: Sequence[Mapping[str, Any]],
    *,
    base_url: str,
    feed: str,
    next_cursor: str | None,
    this_url: str,
    query: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """A page of the feed ``feed`` (``group:key``) as an AS2 ``OrderedCollectionPage``.

    ``this_url`` is the page's own URL as requested; ``next`` (present when
    there is a ``next_cursor``) asks for the following page in AS2 too, with
    the request's other ``query`` parameters (its ``limit``, ``enrich``…).
    """
    base = base_url.rstrip("/")
    feed_url = feed_iri(base, feed)
    out: dict[str, Any] = {
        "@context": context(),
        "id": this_url,
        "type": "OrderedCollectionPage",
        "partOf": feed_url,
        # The items share the page's @context: one per document is enough.
        "orderedItems": [_activity(doc, base) for doc in docs],
    }
    if next_cursor is not None:
        kept = [(k, v) for k, v in query if k not in ("cursor", "format")]
        params = [*kept, ("cursor", next_cursor), ("format", PageFormat.AS2)]
        out["next"] = (
            feed_url + "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params)
        )
    return out


# -- IRIs ------------------------------------------------------------------------


def user_iri(base: str, user_id: str) -> str:
    return f"{base}/v1/users/{_segment(user_id)}"


def object_iri(base: str, ref: str) -> str:
    """``photo:17`` -> ``{base}/v1/objects/photo/17``; a ref with no type
    (no colon) -> ``{base}/v1/objects/{ref}``."""
    kind, sep, object_id = ref.partition(":")
    if sep and kind:
        return f"{base}/v1/objects/{_segment(kind)}/{_segment(object_id)}"
    return f"{base}/v1/objects/{_segment(ref)}"


def feed_iri(base: str, feed: str) -> str:
    """``notification:alice`` -> ``{base}/v1/feeds/notification/alice``."""
    group, sep, key = feed.partition(":")
    if not sep:
        raise ValueError(f"not a feed id (group:key): {feed[:64]!r}")
    return f"{base}/v1/feeds/{_segment(group)}/{_segment(key)}"


def _segment(value: str) -> str:
    return quote(value, safe=_PCHAR)


# -- rendering -------------------------------------------------------------------

# Reads may add these to an activity; each is kept under its tidings term.
_READ_FIELDS = ("score", "explain", "reaction_counts", "latest_reactions", "own_reactions")


def _activity(doc: Mapping[str, Any], base: str) -> dict[str, Any]:
    verb = str(doc["verb"])
    out: dict[str, Any] = {
        "id": f"{base}/v1/activities/{_segment(str(doc['id']))}",
        "type": activity_type(verb) or EXTENSION_ACTIVITY_TYPE,
        "actor": _actor(doc["actor"], base),
        # Kept even when the type says it: "post" and "create" are both a
        # Create, and a reader of this form may still want the verb as sent.
        "verb": verb,
        "object": _object(doc["object"], base),
    }
    if doc.get("target") is not None:
        out["target"] = _object(doc["target"], base)
    if doc.get("time") is not None:
        out["published"] = _time(doc["time"])
    if doc.get("to"):
        out["to"] = [feed_iri(base, feed) for feed in doc["to"]]
    if doc.get("foreign_id") is not None:
        out["foreign_id"] = doc["foreign_id"]
    if doc.get("extra") is not None:
        out["extra"] = doc["extra"]
    for name in _READ_FIELDS:
        if doc.get(name) is not None:
            out[name] = doc[name]
    return out


def _actor(actor: str | Mapping[str, Any], base: str) -> str | dict[str, Any]:
    if not isinstance(actor, Mapping):
        return user_iri(base, actor)
    iri = user_iri(base, str(actor["id"]))
    if actor.get("deleted"):
        # formerType takes an IRI (it is @type @id in the AS2 context), not a
        # type name: a bare "Person" would read as a relative IRI.
        return {"id": iri, "type": "Tombstone", "formerType": "as:Person"}
    out: dict[str, Any] = {"id": iri, "type": "Person"}
    handle = actor.get("handle")
    profile = actor.get("profile")
    if handle is not None:
        out["preferredUsername"] = handle
    # AS2's name is the display name: the profile's when it has one, else
    # the handle, so a reader always has something to show.
    name = profile.get("name") if isinstance(profile, Mapping) else None
    if isinstance(name, str) and name:
        out["name"] = name
    elif handle is not None:
        out["name"] = handle
    if profile is not None:
        out["profile"] = profile
    return out


def _object(ref: str | Mapping[str, Any], base: str) -> str | dict[str, Any]:
    if not isinstance(ref, Mapping):
        return object_iri(base, ref)
    kind = ref.get("type")
    if ref.get("deleted"):
        # A tombstone of an object carries its type and id, like the object did.
        full = f"{kind}:{ref['id']}" if kind else str(ref["id"])
        return {"id": object_iri(base, full), "type": "Tombstone"}
    # An object read with a field projection may lack its type: its id is
    # then taken as the whole reference.
    full_ref = f"{kind}:{ref['id']}" if kind else str(ref["id"])
    out: dict[str, Any] = {"id": object_iri(base, full_ref), "type": "Object"}
    if kind:
        out["object_type"] = kind
    if ref.get("data") is not None:
        out["data"] = ref["data"]
    return out


def _time(value: str | datetime) -> str:
    if isinstance(value, datetime):
        # The form tidings stores: UTC with a Z, which xsd:dateTime reads.
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _verb_key(verb: str) -> str:
    # Case and separators vary between producers: "TentativeAccept",
    # "tentative_accept" and "tentative-accept" are one verb.
    return verb.lower().replace("_", "").replace("-", "")
