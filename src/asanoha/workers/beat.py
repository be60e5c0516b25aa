"""The Celery beat schedule: one entry per ``cron=`` job, plus the outbox relay tick."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Registry
from asanoha.platform.model.users import SYSTEM_USER_ID
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import queue_for_job, queue_name

RELAY_TASK_NAME = "asanoha.relay-outbox"
#: Seconds between relay ticks; rows the writer published never wait for it.
RELAY_INTERVAL = 10.0


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
    """Beat entries for every cron job, run as the default tenant's system user."""
    schedule: dict[str, dict[str, Any]] = {
        RELAY_TASK_NAME: {
            "task": RELAY_TASK_NAME,
            "schedule": RELAY_INTERVAL,
            "options": {"queue": queue_name(settings.queue_prefix, "worker")},
        }
    }
    for job in registry.jobs:
        if job.cron is None:
            continue
        schedule[job.qn] = {
            "task": job.qn,
            "schedule": parse_cron(job.cron, job.qn),
            "args": [{}],
            "kwargs": {
                "meta": {
                    "tenant_id": settings.default_tenant,
                    "triggered_by": SYSTEM_USER_ID,
                    "trigger_name": "cron",
                }
            },
            "options": {"queue": queue_for_job(settings, job)},
        }
    return schedule
