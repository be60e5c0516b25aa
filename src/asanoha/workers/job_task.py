"""The Celery task of a job: a pointer to its job row, run by the ``AttemptRunner``."""

from __future__ import annotations

import uuid
from typing import Any

from celery import Celery, Task
from celery.exceptions import TimeLimitExceeded

from asanoha.platform.model import JobDef
from asanoha.platform.settings import Settings
from asanoha.workers.attempts import AttemptRunner
from asanoha.workers.retry_policy import HARD_LIMIT_GRACE, job_timeout


class JobTask(Task):  # type: ignore[misc]
    """The task class of every job: records an attempt killed at its hard time limit.

    At the hard limit the prefork pool kills the attempt's process, which writes no end.
    Celery reports the kill in the worker's main process, to ``on_failure`` with
    ``TimeLimitExceeded``; the attempt is ended there as crashed, and the next attempt
    follows after its backoff. Its message is then given back rather than acknowledged
    (``acks_on_timeout=False``): when that end could not be written (the database
    failing), the redelivery finds the attempt still running and ends it as crashed as for
    any lost worker; when it was written, the redelivery finds the attempt ended and is
    acknowledged unrun. Acknowledged, the message would be gone and the row would stay
    running until the relay's recovery, a visibility timeout later.
    """

    #: Set per job by ``register_job_task``.
    runner: AttemptRunner
    job: JobDef

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Called in the pool process for an exception of the body (already recorded), and
        # in the main process for a hard time limit.
        if isinstance(exc, TimeLimitExceeded):
            attempt = kwargs.get("attempt") if isinstance(kwargs, dict) else None
            self.runner.end_killed_attempt(
                self.job, uuid.UUID(task_id), attempt if isinstance(attempt, int) else None
            )


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
        reject_on_worker_lost=True,
        # See ``JobTask``: a message whose attempt hit the hard limit comes back.
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
