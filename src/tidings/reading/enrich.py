"""Enrichment: a page's ``actor`` as the user, ``object`` and ``target`` as the
stored objects, in one batched lookup per kind for the whole page.

A reference to a deleted user becomes a tombstone (``{"id": …, "deleted":
true}``; a deleted object's keeps its ``type`` too), never an error; a reference nothing was
ever stored under stays the string it was (an object an application keeps
elsewhere). ``fields`` projects profiles and objects' data to those keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tidings.canonical.store import CanonicalStore
from tidings.core.errors import ValidationError
from tidings.core.users import object_tombstone, project, split_ref, tombstone

#: Fields one ``fields=`` may name.
MAX_FIELDS = 50


def parse_fields(raw: str | Iterable[str] | None) -> frozenset[str] | None:
    """``"avatar,name"`` (or a list) to the keys kept; None: everything."""
    if raw is None:
        return None
    words = raw.split(",") if isinstance(raw, str) else list(raw)
    kept = frozenset(w.strip() for w in words if w.strip())
    if len(kept) > MAX_FIELDS:
        raise ValidationError(f"{len(kept)} fields; the limit is {MAX_FIELDS}", field="fields")
    return kept


class Enricher:
    def __init__(self, canonical: CanonicalStore) -> None:
        self.canonical = canonical

    def docs(self, docs: Sequence[bytes], fields: frozenset[str] | None) -> list[bytes]:
        """Each activity's JSON, enriched."""
        items = [orjson.loads(d) for d in docs]
        self.items(items, fields)
        return [orjson.dumps(i) for i in items]

    def items(self, items: Sequence[dict[str, Any]], fields: frozenset[str] | None) -> None:
        """Enrich activities (dicts in their JSON shape) in place."""
        if not items:
            return
        store = self.canonical.users
        actors = [i["actor"] for i in items if isinstance(i.get("actor"), str)]
        refs = [r for i in items for r in (i.get("object"), i.get("target")) if isinstance(r, str)]
        users = store.get_many(actors)
        objects = store.get_objects([r for r in refs if split_ref(r) is not None])
        for item in items:
            actor = item.get("actor")
            if isinstance(actor, str) and actor in users:
                user = users[actor]
                # Before a re-created id's first id: the deleted user's activity.
                item["actor"] = (
                    tombstone(actor)
                    if user is None or str(item.get("id", "")) < user.first_id
                    else {
                        "id": user.id,
                        "handle": user.handle,
                        "profile": project(user.profile, fields),
                    }
                )
            for key in ("object", "target"):
                ref = item.get(key)
                if isinstance(ref, str) and ref in objects:
                    found = objects[ref]
                    kind, _, object_id = ref.partition(":")
                    item[key] = (
                        object_tombstone(kind, object_id)
                        if found is None
                        else {
                            "type": found.type,
                            "id": found.id,
                            "data": project(found.data, fields),
                        }
                    )
