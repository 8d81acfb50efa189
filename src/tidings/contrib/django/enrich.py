"""Pages with model instances: the references ``"app_label.model_name:pk"`` in
activities' ``actor``, ``object`` and ``target`` become the instances, with
one query per model per call (never one per activity), and a
:class:`Tombstone` for a row that no longer exists. A value without a model
label is a user's key (:func:`~tidings.contrib.django.refs.ref` names users
so): the user when it can be one of the user model's keys."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from tidings.core.activity import Activity

FIELDS = ("actor", "object", "target")


@dataclass(frozen=True)
class Tombstone:
    """A reference to a row that is gone (or whose key cannot be one); false in a test."""

    ref: str
    model: Any
    pk: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Enriched:
    """An activity and its ``actor``, ``object`` and ``target`` as instances,
    tombstones, or the strings themselves where they name no installed model."""

    activity: Activity
    actor: Any
    object: Any
    target: Any


def _parse(value: str | None) -> tuple[Any, str, bool] | None:
    """The model and key ``value`` names, and whether it is a bare user key."""
    if not value:
        return None
    label, sep, pk = value.partition(":")
    if not sep:
        return get_user_model(), value, True
    if "." not in label or not pk:
        return None
    try:
        return apps.get_model(label), pk, False
    except (LookupError, ValueError):
        return None


def resolve(refs: Iterable[str | None]) -> dict[str, Any]:
    """What each model reference among ``refs`` names, one query per model:
    an instance or a :class:`Tombstone` (other strings are left out)."""
    wanted: dict[Any, dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
    found: dict[str, Any] = {}
    for value in set(refs):
        parsed = _parse(value)
        if parsed is None or value is None:
            continue
        model, pk, bare = parsed
        try:
            key = model._meta.pk.to_python(pk)
        except (ValidationError, ValueError, TypeError):
            if not bare:  # a bare string that cannot be a user's key is only a string
                found[value] = Tombstone(value, model, pk)
            continue
        wanted[model][key].append(value)
    for model, keys in wanted.items():
        rows = model._default_manager.in_bulk(list(keys))
        for key, values in keys.items():
            for value in values:
                row = rows.get(key)
                found[value] = (
                    row if row is not None else Tombstone(value, model, value.rpartition(":")[2])
                )
    return found


def enrich(activities: Sequence[Activity]) -> list[Enriched]:
    """``activities`` (a page's ``results``) with their references resolved."""
    found = resolve(getattr(a, name) for a in activities for name in FIELDS)
    return [
        Enriched(
            a,
            *(found.get(v, v) if (v := getattr(a, name)) else v for name in FIELDS),
        )
        for a in activities
    ]


def enrich_json(items: Sequence[dict[str, Any]]) -> None:
    """Activities in their JSON shape (a page the views send), their model
    references replaced in place, one query per model for them all: an
    instance by ``{"type": "app_label.model_name", "id": pk, "name": str(it)}``
    (and ``"url"``, its ``get_absolute_url()``, where it has one), a row that is
    gone by ``{"type", "id", "deleted": true}`` (as the HTTP API's tombstones).
    ``name`` and ``url`` should not query (a ``__str__`` reading a related row
    costs a query per activity)."""
    found = resolve(v for item in items for name in FIELDS if isinstance(v := item.get(name), str))
    for item in items:
        for name in FIELDS:
            value = item.get(name)
            if isinstance(value, str) and value in found:
                item[name] = as_json(found[value], value)


def as_json(found: Any, reference: str) -> dict[str, Any]:
    """What :func:`enrich_json` puts in place of ``reference``."""
    if isinstance(found, Tombstone):
        return {"type": found.model._meta.label_lower, "id": found.pk, "deleted": True}
    label = found._meta.label_lower
    shown: dict[str, Any] = {"type": label, "id": str(found.pk), "name": str(found)}
    if hasattr(found, "get_absolute_url"):
        shown["url"] = found.get_absolute_url()
    return shown
