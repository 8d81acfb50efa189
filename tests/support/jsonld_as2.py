"""Reading ActivityStreams 2.0 documents as a JSON-LD consumer does: pyld,
against the W3C AS2 context shipped beside the tests (the document served at
https://www.w3.org/ns/activitystreams), with no network."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from pyld import jsonld  # type: ignore[import-untyped]

from tidings.core import as2

AS = "https://www.w3.org/ns/activitystreams#"
T = as2.TIDINGS_NS

AS2_CONTEXT_DOCUMENT = orjson.loads(
    (Path(__file__).with_name("activitystreams.jsonld")).read_bytes()
)


def load_document(url: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """pyld's document loader: the local AS2 context, and nothing else."""
    if url != as2.AS2_CONTEXT:
        raise ValueError(f"no network in tests: refusing to load {url}")
    return {
        "contextUrl": None,
        "documentUrl": url,
        "contentType": "application/ld+json",
        # A copy: pyld must not be able to change the next test's context.
        "document": orjson.loads(orjson.dumps(AS2_CONTEXT_DOCUMENT)),
    }


OPTIONS = {"documentLoader": load_document}


def expand(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``doc`` expanded, after a trip through JSON (what a client receives),
    with every property kept and every key a full IRI of AS2 or ours."""
    dropped: list[Any] = []
    expanded: list[dict[str, Any]] = jsonld.expand(
        orjson.loads(orjson.dumps(doc)),
        OPTIONS,
        on_property_dropped=lambda *args, **kwargs: dropped.append((args, kwargs)),
    )
    assert dropped == []
    keys = set(_keys(expanded))
    assert {k for k in keys if not k.startswith(("@", AS, T))} == set()
    return expanded


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            yield from _keys(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            # A JSON literal's keys are data, not properties.
            if value.get("@type") != "@json":
                yield from _keys(item)
