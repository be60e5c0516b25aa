"""The Celery beat schedule: one entry per ``cron=`` job, plus the prune of finished job rows.

Beat sends no job message itself: each tick runs ``asanoha.cron``, which enqueues the job
through the outbox like any other enqueue, so a cron run has a job row and its record.
"""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Registry
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import queue_name

CRON_TASK_NAME = "asanoha.cron"
PRUNE_TASK_NAME = "asanoha.prune-jobs"
#: The prune runs hourly, at this minute.
PRUNE_MINUTE = 17


def parse_cron(expression: str, job_qn: str) -> crontab:
    """A ``crontab`` from a five-field expression (minute hour day-of-month month day-of-week)."""
    parts = expression.split()
    if len(parts) != 5:
        raise DefinitionError(
            f"{job_qn}: cron={expression!r} must have five fields "
            "(minute hour day-of-month month day-of-week)"
        )
    minute, hour, day_of_month, month_of_year, day_of_week = parts
    try:
        return crontab(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
        )
    except (ValueError, TypeError) as exc:
        raise DefinitionError(f"{job_qn}: cron={expression!r} is not valid: {exc}") from exc


def build_beat_schedule(registry: Registry, settings: Settings) -> dict[str, dict[str, Any]]:
    """Beat entries: every cron job (enqueued as the default tenant's system user) and the
    hourly prune of finished job rows older than ``ASANOHA_JOB_RETENTION_DAYS``."""
    queue = queue_name(settings.queue_prefix, "worker")
    schedule: dict[str, dict[str, Any]] = {
        PRUNE_TASK_NAME: {
            "task": PRUNE_TASK_NAME,
            "schedule": crontab(minute=str(PRUNE_MINUTE)),
            "options": {"queue": queue},
        }
    }
    for job in registry.jobs:
        if job.cron is None:
            continue
        schedule[job.qn] = {
            "task": CRON_TASK_NAME,
            "schedule": parse_cron(job.cron, job.qn),
            "args": [job.qn],
            "options": {"queue": queue},
        }
    return schedule
