"""The Celery task of a job: a pointer to its job row, run by the ``AttemptRunner``."""

from __future__ import annotations

import uuid
from typing import Any

from celery import Celery, Task
from celery.exceptions import WorkerLostError
from celery.worker.request import Request

from asanoha.platform.model import JobDef
from asanoha.platform.settings import Settings
from asanoha.workers.attempts import AttemptRunner
from asanoha.workers.retry_policy import HARD_LIMIT_GRACE, job_timeout


class JobRequest(Request):  # type: ignore[misc]
    """A delivery of a job, as the worker's main process sees it: ends at once an attempt
    whose pool process is gone.

    A pool process that exits mid-attempt (killed, out of memory), or that the pool kills
    at the hard time limit, writes no end. The main process learns of it here and ends the
    attempt as crashed: the next attempt follows after its backoff. The message is then
    given back, not acknowledged (``reject_on_worker_lost``, ``acks_on_timeout=False``):
    when the end could not be written (the database failing), its redelivery finds the
    attempt still running and ends it once its time limit has passed; when it was written,
    the redelivery finds the attempt ended and is acknowledged unrun. Acknowledged, the
    message would be gone and the row would stay running until the relay's recovery, a
    visibility timeout later.
    """

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if not soft:
            self._end_lost_attempt(time_limit=True)
        super().on_timeout(soft, timeout)

    def on_failure(
        self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False
    ) -> None:
        # The pool hands the exception over wrapped (billiard's ExceptionWithTraceback).
        exc = getattr(exc_info.exception, "exc", exc_info.exception)
        if isinstance(exc, WorkerLostError):
            self._end_lost_attempt(time_limit=False)
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)

    def _end_lost_attempt(self, *, time_limit: bool) -> None:
        task: JobTask = self.task
        attempt = self.kwargs.get("attempt") if isinstance(self.kwargs, dict) else None
        if not isinstance(attempt, int):
            attempt = int(self.request_dict.get("retries") or 0) + 1
        task.runner.end_killed_attempt(
            task.job, uuid.UUID(str(self.id)), attempt, time_limit=time_limit
        )


class JobTask(Task):  # type: ignore[misc]
    """The task class of every job (see ``JobRequest``)."""

    Request = JobRequest
    #: Set per job by ``register_job_task``.
    runner: AttemptRunner
    job: JobDef


def register_job_task(
    celery: Celery, runner: AttemptRunner, job: JobDef, settings: Settings
) -> Task:
    """Register ``job`` as the task named by its qualified name (``task_routes`` puts it on
    its lane's queue). Its message carries no payload: the task id is the job row's id and
    the only argument is the attempt to run."""
    timeout = job_timeout(job, settings)

    @celery.task(  # type: ignore[untyped-decorator]
        base=JobTask,
        runner=runner,
        job=job,
        name=job.qn,
        bind=True,
        # Not shared: each application's job tasks are bound to its own service and database.
        shared=False,
        max_retries=job.retries,
        acks_late=True,
        # See ``JobRequest``: a message whose attempt lost its process comes back.
        reject_on_worker_lost=True,
        acks_on_timeout=False,
        ignore_result=True,
        soft_time_limit=timeout,
        time_limit=timeout + HARD_LIMIT_GRACE,
    )
    def run_job(task: Task, attempt: int | None = None) -> None:
        # The attempt follows Celery's retry count (attempt = retries + 1); a message
        # without one (sent by hand) is the attempt its retry count says.
        runner.run(task, job, attempt if isinstance(attempt, int) else task.request.retries + 1)

    task: Task = run_job
    return task
