"""The Celery task of a job: a pointer to its job row, run by the ``AttemptRunner``."""

from __future__ import annotations

from celery import Celery, Task

from asanoha.platform.model import JobDef
from asanoha.platform.settings import Settings
from asanoha.workers.attempts import AttemptRunner
from asanoha.workers.retry_policy import HARD_LIMIT_GRACE, job_timeout


def register_job_task(
    celery: Celery, runner: AttemptRunner, job: JobDef, settings: Settings
) -> Task:
    """Register ``job`` as the task named by its qualified name (``task_routes`` puts it on
    its lane's queue). Its message carries no payload: the task id is the job row's id and
    the only argument is the attempt to run."""
    timeout = job_timeout(job, settings)

    @celery.task(  # type: ignore[untyped-decorator]
        name=job.qn,
        bind=True,
        # Not shared: each application's job tasks are bound to its own service and database.
        shared=False,
        max_retries=job.retries,
        acks_late=True,
        reject_on_worker_lost=True,
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
