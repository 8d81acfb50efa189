"""Reading what ``/metrics`` answers: Prometheus text as a table of samples."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

#: A sample's name and its labels, sorted.
Key = tuple[str, tuple[tuple[str, str], ...]]


def samples(text: str) -> dict[Key, float]:
    """Every sample of ``text``: ``(name, labels)`` -> value."""
    found: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(table: dict[Key, float], name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (0 when absent: a series
    appears with its first count)."""
    return table.get((name, tuple(sorted(labels.items()))), 0.0)


def total(table: dict[Key, float], name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in table.items() if n == name and wanted <= set(have))
