"""Task runners: who carries out the outbox (in-process threads, or Celery
workers in tidings.tasks.celery, imported only when chosen)."""

from tidings.tasks.base import QUEUES, WORKER_QUEUES, Runner
from tidings.tasks.inline import ManualRunner, SyncRunner, ThreadRunner

__all__ = ["QUEUES", "WORKER_QUEUES", "ManualRunner", "Runner", "SyncRunner", "ThreadRunner"]
