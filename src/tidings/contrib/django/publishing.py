"""Models that publish themselves: :func:`publishes` registers a model, and
its saves and deletes reach tidings after their transaction commits.

An instance publishes one activity, to one feed, with the ``foreign_id``
``"app_label.model_name:pk"``: saving again with the same activity changes
nothing; a save that changes the activity's ``extra`` updates it in place, one
that changes ``actor``, ``verb``, ``object``, ``target`` or ``to`` publishes
it anew (removed, then added). A delete removes it, and so does a queryset's
``delete()`` (Django sends a signal for every row of a model with receivers).
Writes that send no signals (``bulk_create``, ``QuerySet.update()``, raw SQL)
are followed by :func:`publish` / preceded by :func:`unpublish`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import router, transaction
from django.db.models.signals import post_delete, post_save

from tidings.contrib.django.engine import get_engine
from tidings.contrib.django.refs import ref
from tidings.core.errors import NotFound

M = TypeVar("M")

#: The fields of an activity that ``update_activity`` cannot change.
_CORE = ("actor", "verb", "object", "target", "to")


@dataclass(frozen=True)
class Registration:
    """How instances of one model publish: ``feed(instance)`` says where,
    ``activity(instance)`` what (a mapping as ``add_activity`` takes; ``object``
    defaults to the instance's :func:`ref`, ``foreign_id`` is always it), and
    ``when(instance)`` whether it is published now (false: taken back, as on delete)."""

    model: Any
    feed: Callable[[Any], str]
    activity: Callable[[Any], Mapping[str, Any]]
    when: Callable[[Any], bool] | None = None


_registry: dict[Any, Registration] = {}


def publishes(
    *,
    feed: Callable[[Any], str],
    activity: Callable[[Any], Mapping[str, Any]],
    when: Callable[[Any], bool] | None = None,
) -> Callable[[type[M]], type[M]]:
    """Class decorator registering a model to publish itself (see the module and
    :class:`Registration`)."""

    def register(model: type[M]) -> type[M]:
        registration = Registration(model, feed, activity, when)
        _registry[model] = registration
        uid = f"tidings.publish.{id(model)}"
        post_save.connect(_saved, sender=model, weak=False, dispatch_uid=uid)
        post_delete.connect(_deleted, sender=model, weak=False, dispatch_uid=uid)
        return model

    return register


def registration(model: Any) -> Registration:
    """The registration of ``model`` (or of an instance's model)."""
    cls = model if isinstance(model, type) else type(model)
    try:
        return _registry[cls]
    except KeyError:
        raise LookupError(f"{cls.__name__} is not registered with @publishes") from None


def activity_of(instance: Any) -> tuple[str, dict[str, Any]]:
    """The feed and activity of ``instance``."""
    reg = registration(instance)
    made = dict(reg.activity(instance))
    made.setdefault("object", ref(instance))
    made["foreign_id"] = ref(instance)
    return reg.feed(instance), made


def publish(instances: Iterable[Any]) -> None:
    """Add or update the activities of ``instances`` when the current transaction
    commits (at once outside one): after writes that send no ``post_save``."""
    for instance in instances:
        when = registration(instance).when
        if when is None or when(instance):
            _on_commit(instance, _sync, *activity_of(instance))
        else:
            _on_commit(instance, _remove, registration(instance).feed(instance), ref(instance))


def unpublish(instances: Iterable[Any]) -> None:
    """Remove the activities of ``instances`` when the current transaction
    commits: before deletes that send no ``post_delete`` (take the instances
    first, while their rows exist). Only the feed is worked out, not the
    activity: a delete must not fail on what the activity would have named
    (a related row deleted before it)."""
    for instance in instances:
        _on_commit(instance, _remove, registration(instance).feed(instance), ref(instance))


def _saved(sender: Any, instance: Any, raw: bool = False, **_: Any) -> None:
    if not raw:  # (fixtures being loaded)
        publish([instance])


def _deleted(sender: Any, instance: Any, **_: Any) -> None:
    unpublish([instance])


def _on_commit(instance: Any, action: Callable[..., None], *args: Any) -> None:
    using = router.db_for_write(type(instance), instance=instance)
    transaction.on_commit(lambda: action(*args), using=using, robust=False)


def _sync(feed: str, activity: dict[str, Any]) -> None:
    engine = get_engine()
    try:
        stored = engine.get_activity((feed, activity["foreign_id"])).to_dict()
    except NotFound:
        engine.add_activity(feed, activity)
        return
    wanted = {key: activity.get(key) for key in _CORE}
    wanted["to"] = list(wanted["to"] or [])
    if any(stored[key] != wanted[key] for key in _CORE):
        engine.remove_activity(feed, foreign_id=activity["foreign_id"])
        engine.add_activity(feed, activity)
        return
    extra = dict(activity.get("extra") or {})
    changed = {k: v for k, v in extra.items() if stored["extra"].get(k, _MISSING) != v}
    gone = [k for k in stored["extra"] if k not in extra]
    if changed or gone:
        engine.update_activity((feed, activity["foreign_id"]), set=changed, unset=gone)


def _remove(feed: str, foreign_id: str) -> None:
    with contextlib.suppress(NotFound):  # never published, or removed already
        get_engine().remove_activity(feed, foreign_id=foreign_id)


_MISSING = object()
