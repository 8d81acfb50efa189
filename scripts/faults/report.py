"""What a scenario reports, and when it failed.

A scenario fails on any acknowledged write lost or duplicated (in the
canonical store or in a feed), any response 500, any SSE gap (an
acknowledged activity a resumed stream never showed), or, after a Redis
failover, no entry lost in Redis (the rebuild untested) or any still
missing after the rebuild. 503s are expected
while a store is down and are reported, with how many carried
``Retry-After``; other 5xx are reported too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scripts.faults.audit import Audit

if TYPE_CHECKING:
    from scripts.faults.scenarios import Run


@dataclass(frozen=True)
class SseGap:
    streams: int
    #: Acknowledged activities the streams should have shown, in all.
    expected: int
    #: Those a stream never showed: the gap.
    missing: int
    repeated: int
    resyncs: int
    #: Streams opened again after their server went away, and those that
    #: then read on another serve process.
    resumed: int
    resumed_elsewhere: int


@dataclass(frozen=True)
class RedisLoss:
    """What a Redis failover lost, read in Redis once the deliveries drained,
    and what the operator's rebuild left missing (must be 0)."""

    #: Feeds lacking an acknowledged entry, and the entries missing in all
    #: (above 0: the replica really missed writes its master acknowledged).
    feeds_lacking: int
    entries_missing: int
    #: The command run after the failover, and the feeds it rebuilt.
    command: str
    feeds_rebuilt: int
    entries_missing_after: int


@dataclass
class Report:
    scenario: str
    load_seconds: float
    sent: int
    statuses: dict[str, int]
    retry_after: int
    audit: Audit
    #: Seconds from the fault to the last request of the load that failed
    #: (5xx or no answer): how long clients saw it; 0 when none failed.
    recovered_s: float
    #: Whether a publish was acknowledged after the repair.
    served_after: bool
    unsure_follows: int
    sse: SseGap | None = None
    redis_loss: RedisLoss | None = None
    notes: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(
        cls, scenario: str, load_seconds: float, run: Run, audit: Audit, sse: SseGap | None
    ) -> Report:
        ledger = run.ledger
        after = any(t >= run.repaired_at for t in ledger.answered_at.values())
        failed_for = max(0.0, ledger.last_failure_at - run.fault_at)
        return cls(
            scenario=scenario,
            load_seconds=round(load_seconds, 1),
            sent=ledger.sent,
            statuses=dict(sorted(ledger.statuses.items())),
            retry_after=ledger.retry_after,
            audit=audit,
            recovered_s=round(failed_for, 1),
            served_after=after,
            unsure_follows=ledger.unsure_follows,
            sse=sse,
            redis_loss=run.redis_loss,
            notes=run.notes,
        )

    def count(self, status: int) -> int:
        return sum(n for k, n in self.statuses.items() if k.endswith(f" {status}"))

    @property
    def other_5xx(self) -> int:
        return sum(
            n
            for k, n in self.statuses.items()
            if int(k.rpartition(" ")[2]) >= 500 and not k.endswith((" 500", " 503"))
        )

    @property
    def failures(self) -> list[str]:
        out = []
        if self.audit.lost:
            out.append(f"{self.audit.lost} acknowledged publishes lost")
        if self.audit.duplicated:
            out.append(f"{self.audit.duplicated} acknowledged publishes stored twice")
        if self.audit.missing_in_feeds:
            out.append(f"{self.audit.missing_in_feeds} acknowledged entries missing from feeds")
        if self.audit.duplicated_in_feeds:
            out.append(f"{self.audit.duplicated_in_feeds} feed entries held twice")
        if self.count(500):
            out.append(f"{self.count(500)} responses 500")
        if self.sse is not None and self.sse.missing:
            out.append(f"SSE gap: {self.sse.missing} activities never shown")
        loss = self.redis_loss
        if loss is not None and not loss.entries_missing:
            out.append("no entry was lost in Redis: the rebuild went untested")
        if loss is not None and loss.entries_missing_after:
            out.append(
                f"{loss.entries_missing_after} entries still missing in Redis after {loss.command}"
            )
        if not self.served_after:
            out.append("no publish was acknowledged after the repair")
        return out

    def text(self) -> str:
        a = self.audit
        lines = [
            f"{self.scenario}: {'PASS' if not self.failures else 'FAIL'}",
            f"  publishes sent {self.sent}, acknowledged {a.acknowledged}, lost {a.lost}, "
            f"duplicated {a.duplicated}",
            f"  feeds checked {a.feeds}: entries missing {a.missing_in_feeds}, "
            f"held twice {a.duplicated_in_feeds}",
            f"  responses: 500: {self.count(500)}, 503: {self.count(503)} "
            f"({self.retry_after} with Retry-After), other 5xx: {self.other_5xx}, "
            f"no answer (refused ones then sent to the other serve): {self.count(0)}",
            f"  by request and status: {self.statuses}",
            f"  recovered (fault to the last failed request): {self.recovered_s} s; "
            f"load ran {self.load_seconds} s",
        ]
        if self.sse is not None:
            s = self.sse
            lines.append(
                f"  SSE: {s.streams} streams, {s.expected} activities expected, gap "
                f"{s.missing}, repeated {s.repeated}, resync {s.resyncs}, resumed "
                f"{s.resumed} ({s.resumed_elsewhere} streams on the other serve)"
            )
        if (loss := self.redis_loss) is not None:
            lines.append(
                f"  Redis after the failover: {loss.entries_missing} entries missing in "
                f"{loss.feeds_lacking} feeds; `{loss.command}` rebuilt {loss.feeds_rebuilt} "
                f"feeds; missing after it: {loss.entries_missing_after}"
            )
        lines += [f"  {k}: {v}" for k, v in self.notes.items()]
        lines += [f"  FAILED: {f}" for f in self.failures]
        lines += [f"  e.g. {e}" for e in a.examples]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "passed": not self.failures,
            "failures": self.failures,
            "sent": self.sent,
            "acknowledged": self.audit.acknowledged,
            "lost": self.audit.lost,
            "duplicated": self.audit.duplicated,
            "missing_in_feeds": self.audit.missing_in_feeds,
            "duplicated_in_feeds": self.audit.duplicated_in_feeds,
            "http_500": self.count(500),
            "http_503": self.count(503),
            "retry_after": self.retry_after,
            "other_5xx": self.other_5xx,
            "recovered_s": self.recovered_s,
            "sse": None if self.sse is None else vars(self.sse),
            "redis_loss": None if self.redis_loss is None else vars(self.redis_loss),
            "notes": {k: v for k, v in self.notes.items() if k != "limits"},
            "statuses": self.statuses,
        }
