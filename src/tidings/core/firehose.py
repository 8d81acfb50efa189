"""The filtered firehose: which connections an activity goes to.

Filters are Twitter's ``statuses/filter``, ORed: ``track`` phrases (comma =
OR, space = AND; case-insensitive whole words over verb, object, target and
the string values of ``extra``), ``follow`` (actors), ``locations`` (bounding
boxes over ``extra.lng`` / ``extra.lat``) and ``sample`` (a percentage, by a
hash of the activity id, so every client keeps the same activities).

One :class:`FirehoseIndex` holds the filters of every connection of a process:
a phrase is found through its first word, an actor by name, a box through the
grid cells it covers, a sample by its threshold. Matching an activity costs
its words, one grid cell and the matches, not connections times activities.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidings.core.errors import ValidationError

MAX_TRACK = 400
MAX_FOLLOW = 5000
MAX_BOXES = 25
MAX_PHRASE_LENGTH = 60
MIN_SAMPLE, MAX_SAMPLE = 0.01, 100.0
#: A box covering more grid cells than this is checked for every located
#: activity instead of being indexed cell by cell.
MAX_INDEXED_CELLS = 1024

_WORD = re.compile(r"\w+")

Box = tuple[float, float, float, float]  # west (lng), south (lat), east, north


def words(text: str) -> list[str]:
    """The case-folded whole words of ``text``."""
    return _WORD.findall(text.casefold())


@dataclass(frozen=True)
class Filter:
    """One connection's filters; empty: every activity."""

    track: tuple[tuple[str, ...], ...] = ()
    follow: frozenset[str] = field(default_factory=frozenset)
    locations: tuple[Box, ...] = ()
    sample: float | None = None

    @property
    def empty(self) -> bool:
        return not (self.track or self.follow or self.locations or self.sample is not None)

    @classmethod
    def parse(
        cls,
        track: str | None = None,
        follow: str | None = None,
        locations: str | None = None,
        sample: str | float | None = None,
    ) -> Filter:
        """The filters as the query parameters give them; ValidationError
        naming the parameter and the limit when one is malformed or too big
        (or, as JSON may give it, not text at all)."""
        return cls(
            _track(_text(track, "track")),
            _follow(_text(follow, "follow")),
            _locations(_text(locations, "locations")),
            _sample(sample),
        )

    def matches(self, activity: Mapping[str, Any]) -> bool:
        """Whether ``activity`` (as its JSON) passes: the reference the index agrees with."""
        if self.empty:
            return True
        if self.follow and activity.get("actor") in self.follow:
            return True
        if self.track:
            have = set(activity_words(activity))
            if any(all(w in have for w in phrase) for phrase in self.track):
                return True
        point = location(activity)
        if point is not None and any(_inside(point, box) for box in self.locations):
            return True
        return self.sample is not None and sample_point(str(activity.get("id"))) < self.sample


def _text(raw: object, name: str) -> str:
    """``raw`` as the comma-separated text the filter is; a number (a WebSocket
    message's ``{"track": 5}``) is refused, not guessed at."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ValidationError(
            f"must be a string of comma-separated values, not {str(raw)[:20]}", field=name
        )
    return raw


def _track(raw: str) -> tuple[tuple[str, ...], ...]:
    phrases: list[tuple[str, ...]] = []
    for part in raw.split(","):
        if not part.strip():
            continue
        if len(part) > MAX_PHRASE_LENGTH:
            raise ValidationError(
                f"phrase {part[:20]!r}… is {len(part)} characters; the limit is "
                f"{MAX_PHRASE_LENGTH}",
                field="track",
            )
        found = tuple(dict.fromkeys(words(part)))
        if not found:
            raise ValidationError(f"phrase {part!r} has no words", field="track")
        phrases.append(found)
    if len(phrases) > MAX_TRACK:
        raise ValidationError(
            f"has {len(phrases)} phrases; the limit is {MAX_TRACK}", field="track"
        )
    return tuple(dict.fromkeys(phrases))


def _follow(raw: str) -> frozenset[str]:
    actors = [a.strip() for a in raw.split(",") if a.strip()]
    if len(actors) > MAX_FOLLOW:
        raise ValidationError(
            f"has {len(actors)} actors; the limit is {MAX_FOLLOW}", field="follow"
        )
    return frozenset(actors)


def _locations(raw: str) -> tuple[Box, ...]:
    if not raw.strip():
        return ()
    try:
        numbers = [float(x) for x in raw.split(",")]
    except ValueError:
        raise ValidationError(
            "must be numbers: lng1,lat1,lng2,lat2 per box", field="locations"
        ) from None
    if len(numbers) % 4 or not all(math.isfinite(n) for n in numbers):
        raise ValidationError(
            f"has {len(numbers)} numbers; each box is 4 finite ones (west,south,east,north)",
            field="locations",
        )
    if len(numbers) // 4 > MAX_BOXES:
        raise ValidationError(
            f"has {len(numbers) // 4} boxes; the limit is {MAX_BOXES}", field="locations"
        )
    boxes: list[Box] = []
    for at in range(0, len(numbers), 4):
        west, south, east, north = numbers[at : at + 4]
        if not (-180 <= west < east <= 180 and -90 <= south < north <= 90):
            raise ValidationError(
                f"box {at // 4 + 1} ({west},{south},{east},{north}) must have "
                "-180 ≤ west < east ≤ 180 and -90 ≤ south < north ≤ 90",
                field="locations",
            )
        boxes.append((west, south, east, north))
    return tuple(boxes)


def _sample(raw: object) -> float | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValidationError(f"must be a number, not {str(raw)[:20]}", field="sample")
    try:
        value = float(raw)
    except (ValueError, OverflowError):  # OverflowError: an int of hundreds of digits
        raise ValidationError(f"not a number: {str(raw)[:20]!r}", field="sample") from None
    if not MIN_SAMPLE <= value <= MAX_SAMPLE:
        raise ValidationError(
            f"is {value}; a percentage from {MIN_SAMPLE} to {MAX_SAMPLE}", field="sample"
        )
    return value


def activity_words(activity: Mapping[str, Any]) -> list[str]:
    """The words ``track`` matches: verb, object, target, string values of extra."""
    texts = [activity.get("verb"), activity.get("object"), activity.get("target")]
    extra = activity.get("extra")
    if isinstance(extra, Mapping):
        texts.extend(_strings(extra.values()))
    return [w for t in texts if isinstance(t, str) for w in words(t)]


def _strings(values: Iterable[Any]) -> Iterable[str]:
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            yield from _strings(value.values())
        elif isinstance(value, list):
            yield from _strings(value)


def location(activity: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(lng, lat)`` from ``extra``, when both are numbers in range."""
    extra = activity.get("extra")
    if not isinstance(extra, Mapping):
        return None
    lng, lat = extra.get("lng"), extra.get("lat")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lng, lat)):
        return None
    if not (-180 <= lng <= 180 and -90 <= lat <= 90):  # type: ignore[operator]
        return None
    return float(lng), float(lat)  # type: ignore[arg-type]


def sample_point(activity_id: str) -> float:
    """Where an activity falls in [0, 100): the same for every client and process."""
    digest = hashlib.blake2b(activity_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100


def _inside(point: tuple[float, float], box: Box) -> bool:
    lng, lat = point
    return box[0] <= lng <= box[2] and box[1] <= lat <= box[3]


def _cell(lng: float, lat: float) -> tuple[int, int]:
    return min(math.floor(lng), 179), min(math.floor(lat), 89)


def _cells(box: Box) -> list[tuple[int, int]]:
    west, south = _cell(box[0], box[1])
    east, north = _cell(box[2], box[3])
    return [(x, y) for x in range(west, east + 1) for y in range(south, north + 1)]


class FirehoseIndex:
    """The filters of many connections, indexed for matching."""

    def __init__(self) -> None:
        self._filters: dict[Hashable, Filter] = {}
        self._everything: set[Hashable] = set()
        self._phrases: dict[str, list[tuple[Hashable, tuple[str, ...]]]] = {}
        self._actors: dict[str, set[Hashable]] = {}
        self._cells: dict[tuple[int, int], list[tuple[Hashable, Box]]] = {}
        self._big_boxes: list[tuple[Hashable, Box]] = []
        #: ``(threshold, connection)``, sorted: an activity at point p goes to
        #: every connection whose threshold is above p.
        self._samples: list[tuple[float, int, Hashable]] = []
        self._order = 0

    def __len__(self) -> int:
        return len(self._filters)

    def __contains__(self, conn: Hashable) -> bool:
        return conn in self._filters

    def add(self, conn: Hashable, flt: Filter) -> None:
        self.remove(conn)
        self._filters[conn] = flt
        if flt.empty:
            self._everything.add(conn)
            return
        for phrase in flt.track:
            self._phrases.setdefault(phrase[0], []).append((conn, phrase))
        for actor in flt.follow:
            self._actors.setdefault(actor, set()).add(conn)
        for box in flt.locations:
            cells = _cells(box)
            if len(cells) > MAX_INDEXED_CELLS:
                self._big_boxes.append((conn, box))
            else:
                for cell in cells:
                    self._cells.setdefault(cell, []).append((conn, box))
        if flt.sample is not None:
            self._order += 1
            bisect.insort(self._samples, (flt.sample, self._order, conn))

    def remove(self, conn: Hashable) -> None:
        flt = self._filters.pop(conn, None)
        if flt is None:
            return
        self._everything.discard(conn)
        for phrase in flt.track:
            self._drop(self._phrases, phrase[0], lambda e: e[0] == conn)
        for actor in flt.follow:
            holders = self._actors.get(actor)
            if holders is not None:
                holders.discard(conn)
                if not holders:
                    del self._actors[actor]
        for box in flt.locations:
            for cell in _cells(box) if len(_cells(box)) <= MAX_INDEXED_CELLS else ():
                self._drop(self._cells, cell, lambda e: e[0] == conn)
        self._big_boxes = [e for e in self._big_boxes if e[0] != conn]
        self._samples = [e for e in self._samples if e[2] != conn]

    @staticmethod
    def _drop(index: dict[Any, list[Any]], key: Any, gone: Any) -> None:
        kept = [e for e in index.get(key, ()) if not gone(e)]
        if kept:
            index[key] = kept
        else:
            index.pop(key, None)

    def match(self, activity: Mapping[str, Any]) -> set[Hashable]:
        """The connections ``activity`` (its JSON) goes to."""
        out = set(self._everything)
        actor = activity.get("actor")
        if isinstance(actor, str) and actor in self._actors:
            out |= self._actors[actor]
        if self._phrases:
            have = set(activity_words(activity))
            for word in have:
                for conn, phrase in self._phrases.get(word, ()):
                    if conn not in out and all(w in have for w in phrase):
                        out.add(conn)
        if self._cells or self._big_boxes:
            point = location(activity)
            if point is not None:
                for conn, box in [*self._cells.get(_cell(*point), ()), *self._big_boxes]:
                    if _inside(point, box):
                        out.add(conn)
        if self._samples:
            p = sample_point(str(activity.get("id")))
            at = bisect.bisect_right(self._samples, (p, math.inf, None))
            out.update(conn for _, _, conn in self._samples[at:])
        return out
