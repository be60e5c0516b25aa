"""Job attempt metrics from Celery's task signals: outcome and duration per job."""

from __future__ import annotations

import time
from typing import Any

from celery import signals

from asanoha.platform.metrics import JobOutcome, observe_job_attempt

#: Celery's final task states after an attempt, as job outcomes.
OUTCOMES: dict[str, JobOutcome] = {"SUCCESS": "succeeded", "RETRY": "retried", "FAILURE": "failed"}

#: Start times by (task id, retries): a retry keeps the task id, and its attempt may start
#: before the previous attempt's postrun signal has run.
_started: dict[tuple[str, int], float] = {}
_jobs: set[str] = set()


def _attempt_key(task_id: str | None, task: Any) -> tuple[str, int]:
    return (task_id or "", int(getattr(task.request, "retries", 0) or 0))


def _on_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if getattr(task, "name", None) in _jobs:
        _started[_attempt_key(task_id, task)] = time.perf_counter()


def _on_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    if getattr(task, "name", None) not in _jobs:
        return
    started = _started.pop(_attempt_key(task_id, task), None)
    outcome = OUTCOMES.get(state or "")
    if started is not None and outcome is not None:
        observe_job_attempt(task.name, outcome, time.perf_counter() - started)


def count_job_attempts(job_qns: set[str]) -> None:
    """Observe the attempts of the jobs named ``job_qns`` in this process and the pool
    processes it forks (Celery's signals are process-wide; other tasks are ignored)."""
    _jobs.update(job_qns)
    signals.task_prerun.connect(_on_prerun, weak=False, dispatch_uid="asanoha-job-metrics-pre")
    signals.task_postrun.connect(_on_postrun, weak=False, dispatch_uid="asanoha-job-metrics-post")
