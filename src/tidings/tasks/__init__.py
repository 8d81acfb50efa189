"""Task runners: who carries out the outbox (in-process threads; Celery later)."""

from tidings.tasks.base import Runner
from tidings.tasks.inline import ManualRunner, SyncRunner, ThreadRunner

__all__ = ["ManualRunner", "Runner", "SyncRunner", "ThreadRunner"]
