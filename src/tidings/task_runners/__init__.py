"""Task runners: who carries out the outbox (in-process threads, or Celery
workers in tidings.task_runners.celery, imported only when chosen)."""

from tidings.task_runners.base import QUEUES, WORKER_QUEUES, TaskRunner
from tidings.task_runners.inline import ManualRunner, SyncRunner, ThreadRunner

__all__ = ["QUEUES", "WORKER_QUEUES", "ManualRunner", "SyncRunner", "TaskRunner", "ThreadRunner"]
