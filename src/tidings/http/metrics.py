"""Prometheus text exposition, without a client library.

Request counts and latency histograms per route template (not per URL, so
feed ids do not explode the label space), plus delivery figures read from
the engine at scrape time.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict
from itertools import accumulate

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = defaultdict(int)
        # Per route: the count of the first bucket each request fits in (its
        # smallest bound >= seconds; the last slot for those over every bound),
        # then the sum of seconds, then the count. Buckets are cumulated when
        # rendered, so a request costs one bisect instead of a pass over them all.
        self._latency: dict[tuple[str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        slot = bisect_left(BUCKETS, seconds)
        with self._lock:
            self._requests[(method, route, status)] += 1
            hist = self._latency.get((method, route))
            if hist is None:
                hist = self._latency[(method, route)] = [0.0] * (len(BUCKETS) + 3)
            hist[slot] += 1
            hist[-2] += seconds
            hist[-1] += 1

    def render(self, *, delivered: int, pending: int, lag_seconds: float) -> str:
        lines = [
            "# HELP tidings_http_requests_total HTTP requests by method, route and status.",
            "# TYPE tidings_http_requests_total counter",
        ]
        with self._lock:
            for (method, route, status), n in sorted(self._requests.items()):
                lines.append(
                    f'tidings_http_requests_total{{method="{method}",route="{route}",'
                    f'status="{status}"}} {n}'
                )
            lines += [
                "# HELP tidings_http_request_seconds HTTP request latency.",
                "# TYPE tidings_http_request_seconds histogram",
            ]
            for (method, route), hist in sorted(self._latency.items()):
                labels = f'method="{method}",route="{route}"'
                for bound, count in zip(BUCKETS, accumulate(hist), strict=False):
                    lines.append(
                        f'tidings_http_request_seconds_bucket{{{labels},le="{bound}"}} {count:.0f}'
                    )
                lines.append(
                    f'tidings_http_request_seconds_bucket{{{labels},le="+Inf"}} {hist[-1]:.0f}'
                )
                lines.append(f"tidings_http_request_seconds_sum{{{labels}}} {hist[-2]:.6f}")
                lines.append(f"tidings_http_request_seconds_count{{{labels}}} {hist[-1]:.0f}")
        lines += [
            "# HELP tidings_deliveries_done_total Outbox rows delivered by this process.",
            "# TYPE tidings_deliveries_done_total counter",
            f"tidings_deliveries_done_total {delivered}",
            "# HELP tidings_deliveries_pending Outbox rows waiting to be delivered.",
            "# TYPE tidings_deliveries_pending gauge",
            f"tidings_deliveries_pending {pending}",
            "# HELP tidings_outbox_lag_seconds Age of the oldest pending delivery.",
            "# TYPE tidings_outbox_lag_seconds gauge",
            f"tidings_outbox_lag_seconds {lag_seconds:.3f}",
        ]
        return "\n".join(lines) + "\n"
