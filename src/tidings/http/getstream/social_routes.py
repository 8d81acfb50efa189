"""The routes of reactions, users, collections and the enriched feed reads,
added to the protocol's route table by :mod:`tidings.http.getstream.app`."""

from __future__ import annotations

from starlette.routing import Route

from tidings.http.getstream import collections, enrich, reactions, users
from tidings.http.getstream.endpoint import endpoint
from tidings.http.getstream.resource import resource_endpoint as on

_REACTION = "/reaction/{reaction_id}"
_LOOKUP = "/reaction/{lookup}/{value}"
_USER = "/user/{user_id}"
_COLLECTION = "/collections/{collection}"
_ENTRY = f"{_COLLECTION}/{{entry_id}}"

ROUTES = [
    Route("/reaction/", on("reactions", "write", reactions.add), methods=["POST"]),
    Route(f"{_REACTION}/", on("reactions", "read", reactions.get), methods=["GET"]),
    Route(f"{_REACTION}/", on("reactions", "write", reactions.update), methods=["PUT"]),
    Route(f"{_REACTION}/", on("reactions", "delete", reactions.delete), methods=["DELETE"]),
    Route(f"{_REACTION}/restore/", on("reactions", "write", reactions.restore), methods=["PUT"]),
    Route(f"{_LOOKUP}/", on("reactions", "read", reactions.filter_reactions), methods=["GET"]),
    Route(
        f"{_LOOKUP}/{{kind}}/", on("reactions", "read", reactions.filter_reactions), methods=["GET"]
    ),
    Route("/user/", on("users", "write", users.add), methods=["POST"]),
    Route(f"{_USER}/", on("users", "read", users.get), methods=["GET"]),
    Route(f"{_USER}/", on("users", "write", users.update), methods=["PUT"]),
    Route(f"{_USER}/", on("users", "delete", users.delete), methods=["DELETE"]),
    Route(f"{_COLLECTION}/", on("collections", "write", collections.add), methods=["POST"]),
    Route(f"{_ENTRY}/", on("collections", "read", collections.get), methods=["GET"]),
    Route(f"{_ENTRY}/", on("collections", "write", collections.update), methods=["PUT"]),
    Route(f"{_ENTRY}/", on("collections", "delete", collections.delete), methods=["DELETE"]),
    Route("/enrich/feed/{slug}/{user_id}/", endpoint("feed", "read", enrich.read), methods=["GET"]),
]
