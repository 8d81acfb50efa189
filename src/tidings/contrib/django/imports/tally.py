"""What an import did, table by table, and how it tells its progress."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

#: Skip reasons a summary line names (the most frequent first).
SHOWN_REASONS = 5


@dataclass
class Tally:
    """Rows of one table: read, written (something new in tidings), already
    present (a run before wrote them) and skipped, by reason."""

    table: str
    read: int = 0
    written: int = 0
    present: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def line(self) -> str:
        skipped = sum(self.skipped.values())
        text = (
            f"{self.table}: read {self.read:,}, written {self.written:,}, "
            f"already present {self.present:,}, skipped {skipped:,}"
        )
        common = self.skipped.most_common()
        reasons = [f"{n:,} {reason}" for reason, n in common[:SHOWN_REASONS]]
        if len(common) > SHOWN_REASONS:
            reasons.append(f"{len(common) - SHOWN_REASONS} more reasons")
        return f"{text} ({'; '.join(reasons)})" if reasons else text


class Progress(Protocol):
    """Told how far an import is: a table begins (``total`` rows), rows are done."""

    def begin(self, table: str, total: int) -> None: ...

    def advance(self, rows: int) -> None: ...


class NoProgress:
    """A :class:`Progress` that tells no one."""

    def begin(self, table: str, total: int) -> None:
        pass

    def advance(self, rows: int) -> None:
        pass
