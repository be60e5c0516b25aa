"""Celery: the application factory, job tasks and ``JobContext``, the outbox publisher and
relay, beat schedule, pending-work counts and ``drain``."""

from asanoha.workers.celery_app import make_celery
from asanoha.workers.dispatch import dispatch_job
from asanoha.workers.drain import DrainSummary, DrainTimeoutError, JobFailedError
from asanoha.workers.job_context import JobContext
from asanoha.workers.pending import PendingWork, count_pending_jobs
from asanoha.workers.runtime import JobRuntime

__all__ = [
    "DrainSummary",
    "DrainTimeoutError",
    "JobContext",
    "JobFailedError",
    "JobRuntime",
    "PendingWork",
    "count_pending_jobs",
    "dispatch_job",
    "make_celery",
]
