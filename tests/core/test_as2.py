"""ActivityStreams 2.0 rendering: the documents as AS2 readers see them.

Every document is checked the way a JSON-LD consumer reads it: expanded by
pyld against the W3C AS2 context shipped beside the tests (the document served
at https://www.w3.org/ns/activitystreams; no network), with no property
dropped and none left to the AS2 context's ``"@vocab": "_:"`` (which would
turn an undeclared term into a blank-node property instead of failing).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from pyld import jsonld  # type: ignore[import-untyped]

from jsonld_as2 import AS2_CONTEXT_DOCUMENT, OPTIONS, expand, load_document
from tidings.core import as2

AS = "https://www.w3.org/ns/activitystreams#"
T = as2.TIDINGS_NS
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"
BASE_URL = "https://feeds.example"


def compact(expanded: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = jsonld.compact(expanded, {"@context": as2.context()}, OPTIONS)
    return out


def node(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The single node of an expanded one-node document."""
    expanded = expand(doc)
    assert len(expanded) == 1
    return expanded[0]


def ids_of(values: list[dict[str, Any]]) -> list[str]:
    return [v["@id"] for v in values]


def literal(values: list[dict[str, Any]]) -> Any:
    [value] = values
    return value["@value"]


ACTIVITY: dict[str, Any] = {
    "id": "019ca6b1dfe8a591e50c6de6fc793dee",
    "actor": "bob",
    "verb": "like",
    "object": "photo:17",
    "target": "album:3",
    "time": "2026-03-01T12:00:00.123456Z",
    "foreign_id": "post:17",
    "to": ["notification:alice", "user:carol"],
    "extra": {"caption": "at the lake", "tags": ["a", "b"]},
}


def render(**changes: Any) -> dict[str, Any]:
    return as2.activity({**ACTIVITY, **changes}, base_url=BASE_URL)


# -- the context file and the loader ----------------------------------------------


def test_the_shipped_context_is_the_w3c_one() -> None:
    ctx = AS2_CONTEXT_DOCUMENT["@context"]
    assert ctx["as"] == AS
    assert ctx["orderedItems"] == {"@id": "as:items", "@type": "@id", "@container": "@list"}
    assert ctx["published"] == {"@id": "as:published", "@type": "xsd:dateTime"}


@pytest.mark.parametrize("name", as2.AS2_ACTIVITY_TYPES)
def test_every_mapped_type_is_an_as2_term(name: str) -> None:
    assert AS2_CONTEXT_DOCUMENT["@context"][name] == f"as:{name}"


def test_the_loader_refuses_any_other_url() -> None:
    with pytest.raises(jsonld.JsonLdError):
        jsonld.expand(
            {"@context": "https://example.org/other", "name": "x"},
            {"documentLoader": load_document},
        )


def test_undeclared_terms_are_caught() -> None:
    # The check itself: a term tidings forgot to declare would fall to
    # "@vocab": "_:" and not be an error to pyld.
    with pytest.raises(AssertionError):
        expand({**render(), "undeclared": 1})


# -- verbs and types ------------------------------------------------------------------

VERBS = [
    ("post", "Create"),
    ("create", "Create"),
    ("like", "Like"),
    ("follow", "Follow"),
    ("share", "Announce"),
    ("announce", "Announce"),
    ("repost", "Announce"),
    ("add", "Add"),
    ("remove", "Remove"),
    ("update", "Update"),
    ("delete", "Delete"),
    ("accept", "Accept"),
    ("reject", "Reject"),
    ("join", "Join"),
    ("leave", "Leave"),
    ("view", "View"),
    ("listen", "Listen"),
    ("read", "Read"),
    ("block", "Block"),
    ("flag", "Flag"),
    ("dislike", "Dislike"),
    ("invite", "Invite"),
    ("offer", "Offer"),
    ("undo", "Undo"),
    ("move", "Move"),
    ("arrive", "Arrive"),
    ("travel", "Travel"),
    ("question", "Question"),
    ("ignore", "Ignore"),
    ("tentativeaccept", "TentativeAccept"),
    ("tentativereject", "TentativeReject"),
    # Case and separators do not matter.
    ("LIKE", "Like"),
    ("Post", "Create"),
    ("TentativeAccept", "TentativeAccept"),
    ("tentative_reject", "TentativeReject"),
    ("tentative-accept", "TentativeAccept"),
]


def test_the_verb_table_covers_every_as2_activity_type() -> None:
    assert set(as2.VERB_TYPES.values()) == set(as2.AS2_ACTIVITY_TYPES)
    assert {t for _, t in VERBS} == set(as2.AS2_ACTIVITY_TYPES)


@pytest.mark.parametrize(("verb", "type_"), VERBS)
def test_a_verb_with_an_as2_type(verb: str, type_: str) -> None:
    doc = render(verb=verb)
    assert doc["type"] == type_
    assert doc["verb"] == verb  # kept: "post" and "create" are both a Create
    n = node(doc)
    assert n["@type"] == [AS + type_]
    assert literal(n[T + "verb"]) == verb


@pytest.mark.parametrize("verb", ["pin", "comment", "unfollow", "likes", "re post", "ClapHands"])
def test_a_verb_without_an_as2_type_is_a_tidings_activity(verb: str) -> None:
    doc = render(verb=verb)
    assert doc["type"] == "tidings:Activity"
    assert doc["verb"] == verb
    n = node(doc)
    assert n["@type"] == [T + "Activity"]
    assert literal(n[T + "verb"]) == verb


# -- an activity --------------------------------------------------------------------


def test_an_activity_as_as2() -> None:
    doc = render()
    assert doc == {
        "@context": as2.context(),
        "id": f"{BASE_URL}/v1/activities/019ca6b1dfe8a591e50c6de6fc793dee",
        "type": "Like",
        "actor": f"{BASE_URL}/v1/users/bob",
        "verb": "like",
        "object": f"{BASE_URL}/v1/objects/photo/17",
        "target": f"{BASE_URL}/v1/objects/album/3",
        "published": "2026-03-01T12:00:00.123456Z",
        "to": [f"{BASE_URL}/v1/feeds/notification/alice", f"{BASE_URL}/v1/feeds/user/carol"],
        "foreign_id": "post:17",
        "extra": {"caption": "at the lake", "tags": ["a", "b"]},
    }
    assert doc["@context"][0] == as2.AS2_CONTEXT


def test_an_activity_expands_to_as2_properties() -> None:
    n = node(render())
    assert n["@id"] == f"{BASE_URL}/v1/activities/019ca6b1dfe8a591e50c6de6fc793dee"
    assert ids_of(n[AS + "actor"]) == [f"{BASE_URL}/v1/users/bob"]
    assert ids_of(n[AS + "object"]) == [f"{BASE_URL}/v1/objects/photo/17"]
    assert ids_of(n[AS + "target"]) == [f"{BASE_URL}/v1/objects/album/3"]
    assert ids_of(n[AS + "to"]) == [
        f"{BASE_URL}/v1/feeds/notification/alice",
        f"{BASE_URL}/v1/feeds/user/carol",
    ]
    assert n[AS + "published"] == [{"@type": XSD_DATETIME, "@value": "2026-03-01T12:00:00.123456Z"}]
    assert literal(n[T + "foreign_id"]) == "post:17"


def test_extra_survives_as_a_json_literal() -> None:
    # Keys that JSON-LD would otherwise read (@id, type, a context) stay data.
    extra = {
        "@id": "not-a-node",
        "type": "Note",
        "@context": {"x": "y"},
        "nested": {"list": [1, 2.5, None, "ü", {"deep": True}]},
        "empty": {},
    }
    n = node(render(extra=extra))
    assert n[T + "extra"] == [{"@type": "@json", "@value": extra}]


def test_optional_fields_are_left_out_when_absent() -> None:
    doc = render(target=None, foreign_id=None, to=[])
    for key in ("target", "foreign_id", "to"):
        assert key not in doc
    n = node(doc)
    for prop in (AS + "target", T + "foreign_id", AS + "to"):
        assert prop not in n


def test_the_fields_reads_add() -> None:
    reaction = {
        "id": "r1",
        "activity_id": ACTIVITY["id"],
        "kind": "like",
        "user": "alice",
        "data": {},
        "parent": None,
        "to": [],
        "created_at": "2026-03-01T12:01:00Z",
        "updated_at": "2026-03-01T12:01:00Z",
        "children_counts": {},
    }
    read = {
        "score": 3.25,
        "explain": {"likes": 2, "age_hours": 1.5},
        "reaction_counts": {"like": 2, "comment": 0},
        "latest_reactions": {"like": [reaction]},
        "own_reactions": {"like": [reaction]},
    }
    doc = render(**read)
    for key, value in read.items():
        assert doc[key] == value
    n = node(doc)
    assert literal(n[T + "score"]) == 3.25
    for key in ("explain", "reaction_counts", "latest_reactions", "own_reactions"):
        assert n[T + key] == [{"@type": "@json", "@value": read[key]}]


def test_a_datetime_time_is_written_as_utc() -> None:
    when = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert render(time=when)["published"] == "2026-03-01T12:00:00.123456Z"


# -- IRIs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "iri"),
    [
        ("photo:17", "/v1/objects/photo/17"),
        ("plain", "/v1/objects/plain"),
        ("photo:a:b", "/v1/objects/photo/a:b"),  # the type ends at the first colon
        ("photo:a/b?c#d%", "/v1/objects/photo/a%2Fb%3Fc%23d%25"),  # one segment
        ("user@example.com", "/v1/objects/user@example.com"),
        ("café", "/v1/objects/caf%C3%A9"),
    ],
)
def test_object_and_target_iris(ref: str, iri: str) -> None:
    doc = render(object=ref, target=ref)
    assert doc["object"] == doc["target"] == BASE_URL + iri
    n = node(doc)
    assert ids_of(n[AS + "object"]) == ids_of(n[AS + "target"]) == [BASE_URL + iri]


@pytest.mark.parametrize(
    ("actor", "iri"),
    [("bob", "/v1/users/bob"), ("a.b+c=d@e", "/v1/users/a.b+c=d@e"), ("x/y", "/v1/users/x%2Fy")],
)
def test_actor_iris(actor: str, iri: str) -> None:
    assert render(actor=actor)["actor"] == BASE_URL + iri


def test_a_base_url_with_a_trailing_slash() -> None:
    doc = as2.activity(ACTIVITY, base_url=BASE_URL + "/")
    assert doc["actor"] == f"{BASE_URL}/v1/users/bob"


def test_a_feed_id_needs_a_group() -> None:
    with pytest.raises(ValueError, match="group:key"):
        as2.page([], base_url=BASE_URL, feed="alice", next_cursor=None, this_url=BASE_URL)


# -- enriched actors and objects --------------------------------------------------------


def test_an_enriched_actor_is_a_person() -> None:
    actor = {"id": "bob", "handle": "Bob", "profile": {"name": "Bob Bobson", "avatar": "b.png"}}
    doc = render(actor=actor)
    assert doc["actor"] == {
        "id": f"{BASE_URL}/v1/users/bob",
        "type": "Person",
        "preferredUsername": "Bob",
        "name": "Bob Bobson",
        "profile": {"name": "Bob Bobson", "avatar": "b.png"},
    }
    [person] = node(doc)[AS + "actor"]
    assert person["@id"] == f"{BASE_URL}/v1/users/bob"
    assert person["@type"] == [AS + "Person"]
    assert literal(person[AS + "preferredUsername"]) == "Bob"
    assert literal(person[AS + "name"]) == "Bob Bobson"
    assert person[T + "profile"] == [{"@type": "@json", "@value": actor["profile"]}]


@pytest.mark.parametrize("profile", [{}, {"name": ""}, {"name": 7}])
def test_an_actor_without_a_display_name_is_named_by_handle(profile: dict[str, Any]) -> None:
    doc = render(actor={"id": "bob", "handle": "Bob", "profile": profile})
    assert doc["actor"]["name"] == "Bob"


def test_a_projected_actor_keeps_what_it_has() -> None:
    doc = render(actor={"id": "bob"})
    assert doc["actor"] == {"id": f"{BASE_URL}/v1/users/bob", "type": "Person"}
    node(doc)


def test_a_deleted_actor_is_a_tombstone() -> None:
    doc = render(actor={"id": "bob", "deleted": True})
    assert doc["actor"] == {
        "id": f"{BASE_URL}/v1/users/bob",
        "type": "Tombstone",
        "formerType": "as:Person",
    }
    [tomb] = node(doc)[AS + "actor"]
    assert tomb["@type"] == [AS + "Tombstone"]
    assert ids_of(tomb[AS + "formerType"]) == [AS + "Person"]


def test_an_enriched_object_is_embedded() -> None:
    obj = {"type": "photo", "id": "17", "data": {"url": "p.jpg", "@id": "data, not a node"}}
    doc = render(object=obj)
    assert doc["object"] == {
        "id": f"{BASE_URL}/v1/objects/photo/17",
        "type": "Object",
        "object_type": "photo",
        "data": obj["data"],
    }
    [embedded] = node(doc)[AS + "object"]
    assert embedded["@id"] == f"{BASE_URL}/v1/objects/photo/17"
    assert embedded["@type"] == [AS + "Object"]
    assert literal(embedded[T + "object_type"]) == "photo"
    assert embedded[T + "data"] == [{"@type": "@json", "@value": obj["data"]}]


@pytest.mark.parametrize("field", ["object", "target"])
def test_a_deleted_object_is_a_tombstone(field: str) -> None:
    doc = render(**{field: {"type": "album", "id": "3", "deleted": True}})
    assert doc[field] == {"id": f"{BASE_URL}/v1/objects/album/3", "type": "Tombstone"}
    [tomb] = node(doc)[AS + field]
    assert tomb == {"@id": f"{BASE_URL}/v1/objects/album/3", "@type": [AS + "Tombstone"]}


def test_an_object_projected_without_its_type_is_named_by_its_id() -> None:
    doc = render(object={"id": "photo:17"})
    assert doc["object"] == {"id": f"{BASE_URL}/v1/objects/photo/17", "type": "Object"}
    node(doc)


# -- pages -------------------------------------------------------------------------------

THIS_URL = f"{BASE_URL}/v1/feeds/user/alice/activities?limit=2&format=as2"


def docs(n: int) -> list[dict[str, Any]]:
    return [{**ACTIVITY, "id": f"{i:032x}", "verb": ["post", "pin"][i % 2]} for i in range(n)]


def test_a_page_with_a_next_page() -> None:
    cursor = "AbC-_/+= é"
    doc = as2.page(
        docs(3), base_url=BASE_URL, feed="user:alice", next_cursor=cursor, this_url=THIS_URL
    )
    assert doc["@context"] == as2.context()
    assert doc["type"] == "OrderedCollectionPage"
    assert doc["id"] == THIS_URL
    assert doc["partOf"] == f"{BASE_URL}/v1/feeds/user/alice"
    assert doc["next"] == (
        f"{BASE_URL}/v1/feeds/user/alice?cursor=AbC-_%2F%2B%3D%20%C3%A9&format=as2"
    )
    # One @context, at the top.
    assert all("@context" not in item for item in doc["orderedItems"])
    assert doc["orderedItems"] == [
        {k: v for k, v in as2.activity(d, base_url=BASE_URL).items() if k != "@context"}
        for d in docs(3)
    ]

    n = node(doc)
    assert n["@type"] == [AS + "OrderedCollectionPage"]
    assert n["@id"] == THIS_URL
    assert ids_of(n[AS + "partOf"]) == [f"{BASE_URL}/v1/feeds/user/alice"]
    assert ids_of(n[AS + "next"]) == [doc["next"]]
    [items] = n[AS + "items"]
    # orderedItems is an @list: the order is the feed's.
    assert ids_of(items["@list"]) == [f"{BASE_URL}/v1/activities/{i:032x}" for i in range(3)]
    assert [item["@type"] for item in items["@list"]] == [
        [AS + "Create"],
        [T + "Activity"],
        [AS + "Create"],
    ]
    for item in items["@list"]:
        assert item[AS + "published"][0]["@type"] == XSD_DATETIME
        assert item[T + "extra"][0]["@type"] == "@json"


def test_the_last_page_has_no_next() -> None:
    doc = as2.page(
        docs(1), base_url=BASE_URL, feed="user:alice", next_cursor=None, this_url=THIS_URL
    )
    assert "next" not in doc
    assert AS + "next" not in node(doc)


def test_an_empty_page() -> None:
    doc = as2.page([], base_url=BASE_URL, feed="user:alice", next_cursor=None, this_url=THIS_URL)
    assert doc["orderedItems"] == []
    assert node(doc)[AS + "items"] == [{"@list": []}]


# -- round trips and purity ----------------------------------------------------------------


def _one_to_list(doc: dict[str, Any]) -> dict[str, Any]:
    # Compaction writes a one-element array as its element.
    if isinstance(doc.get("to"), str):
        doc = {**doc, "to": [doc["to"]]}
    return doc


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"verb": "pin", "to": ["user:carol"], "score": 1.5, "reaction_counts": {"like": 1}},
        {
            "actor": {"id": "bob", "handle": "Bob", "profile": {"name": "B"}},
            "object": {"type": "photo", "id": "17", "data": {"w": 640}},
            "target": {"type": "album", "id": "3", "deleted": True},
        },
        {"actor": {"id": "bob", "deleted": True}},
    ],
)
def test_an_activity_compacts_back(changes: dict[str, Any]) -> None:
    doc = render(**changes)
    assert _one_to_list(compact(expand(doc))) == doc


def test_a_page_compacts_back() -> None:
    doc = as2.page(
        docs(3), base_url=BASE_URL, feed="user:alice", next_cursor="c1", this_url=THIS_URL
    )
    back = compact(expand(doc))
    assert {k: v for k, v in back.items() if k != "orderedItems"} == {
        k: v for k, v in doc.items() if k != "orderedItems"
    }
    assert back["orderedItems"] == doc["orderedItems"]


def test_rendering_does_not_change_its_input_or_share_state() -> None:
    before = orjson.dumps(ACTIVITY)
    first = render()
    first["@context"][1]["score"] = "changed"
    first["to"].append("x")
    assert orjson.dumps(ACTIVITY) == before
    assert render() == as2.activity(ACTIVITY, base_url=BASE_URL) != first
    assert as2.context()[1]["score"] == "tidings:score"


def test_the_media_type() -> None:
    assert as2.MEDIA_TYPE == "application/activity+json"
