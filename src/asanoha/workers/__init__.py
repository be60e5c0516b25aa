"""Celery: the Celery side of an application (``make_celery``), job tasks and
``JobContext``, claims and ends of attempts on the job row, the outbox publisher and the
worker's relay, beat schedule, pending-work counts and ``drain``."""

from asanoha.workers.celery_app import CeleryJobs, make_celery
from asanoha.workers.dispatch import dispatch_job
from asanoha.workers.drain import (
    DrainSummary,
    DrainTimeoutError,
    JobFailedError,
    WorkflowFailedError,
)
from asanoha.workers.job_context import JobContext, JobTrigger
from asanoha.workers.pending import PendingWork
from asanoha.workers.runtime import JobRuntime
from asanoha.workers.step_context import StepContext

__all__ = [
    "CeleryJobs",
    "DrainSummary",
    "DrainTimeoutError",
    "JobContext",
    "JobFailedError",
    "JobRuntime",
    "JobTrigger",
    "PendingWork",
    "StepContext",
    "WorkflowFailedError",
    "dispatch_job",
    "make_celery",
]
