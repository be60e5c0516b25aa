"""The Celery beat schedule: one entry per ``cron=`` job, plus the prune of finished job rows
and, when an event type declares ``keep_for=``, the daily prune of its old events.

Beat sends no job message itself: each tick runs ``asanoha.cron``, which enqueues the job
through the outbox like any other enqueue, so a cron run has a job row and its record.

Each tick is recorded once in the database, keyed by (job, scheduled time): the message
carries the tick's scheduled time, computed in the beat process when it sends it (a
``BeatLazyFunc`` argument), and the job row's idempotency key is the job QN and that
time. Two beats side by side (for availability) send each tick twice; the second
enqueue finds the first row and enqueues nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from celery.beat import BeatLazyFunc
from celery.schedules import crontab

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Registry
from asanoha.platform.settings import Settings
from asanoha.platform.store.retention import declared_retention, forget_markers
from asanoha.workers.lanes import platform_queue

CRON_TASK_NAME = "asanoha.cron"
PRUNE_TASK_NAME = "asanoha.prune-jobs"
#: The prune runs hourly, at this minute.
PRUNE_MINUTE = 17
PRUNE_EVENTS_TASK_NAME = "asanoha.prune-events"
#: The event prune runs daily, at this hour and minute (UTC): a quiet hour for most apps.
PRUNE_EVENTS_AT = (3, 41)


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
    """Beat entries: every cron job (enqueued as the default tenant's system user), the
    hourly prune of finished job rows older than ``ASANOHA_JOB_RETENTION_DAYS``, and the
    daily prune of the events of each type declared with ``keep_for=`` and of the entity
    streams closed by forget (when a type declares one, or an entity is declared)."""
    # Ticks and the prune have a queue of their own: they never wait behind a job backlog.
    queue = platform_queue(settings, "cron")
    schedule: dict[str, dict[str, Any]] = {
        PRUNE_TASK_NAME: {
            "task": PRUNE_TASK_NAME,
            "schedule": crontab(minute=str(PRUNE_MINUTE)),
            "options": {"queue": queue},
        }
    }
    if declared_retention(registry) or forget_markers(registry):
        hour, minute = PRUNE_EVENTS_AT
        schedule[PRUNE_EVENTS_TASK_NAME] = {
            "task": PRUNE_EVENTS_TASK_NAME,
            "schedule": crontab(minute=str(minute), hour=str(hour)),
            "options": {"queue": queue},
        }
    for job in registry.jobs:
        if job.cron is None:
            continue
        schedule[job.qn] = {
            "task": CRON_TASK_NAME,
            "schedule": parse_cron(job.cron, job.qn),
            # The tick's scheduled time, computed by beat when it sends the tick.
            "args": [
                job.qn,
                BeatLazyFunc(scheduled_tick, job.cron, job.qn),
                BeatLazyFunc(sent_now),
            ],
            "options": {"queue": queue},
        }
    return schedule


#: How far back ``latest_tick`` looks for a time the expression matches (a Feb 29 cron).
LOOK_BACK = dt.timedelta(days=8 * 366)


def latest_tick(schedule: crontab, now: dt.datetime) -> dt.datetime:
    """The latest minute at or before ``now`` (UTC) that ``schedule`` matches: the scheduled
    time of the tick beat sends at ``now``, also when beat sends it late (a tick it missed
    while it was down runs at its start). As Celery's crontab does, every field must match
    (day of month and day of week together)."""
    moment = now.astimezone(dt.UTC).replace(second=0, microsecond=0)
    oldest = moment - LOOK_BACK
    while moment >= oldest:
        # Celery counts days of the week from Sunday (0); Python from Monday (0).
        weekday = (moment.weekday() + 1) % 7
        if (
            moment.month not in schedule.month_of_year
            or moment.day not in schedule.day_of_month
            or weekday not in schedule.day_of_week
        ):
            # Skip the rest of the day: to the last minute of the day before.
            moment = moment.replace(hour=0, minute=0) - dt.timedelta(minutes=1)
        elif moment.hour not in schedule.hour:
            moment = moment.replace(minute=0) - dt.timedelta(minutes=1)
        elif moment.minute not in schedule.minute:
            moment -= dt.timedelta(minutes=1)
        else:
            return moment
    raise ValueError(f"no time in the last {LOOK_BACK.days} days matches {schedule!r}")


def scheduled_tick(expression: str, job_qn: str) -> str:
    """The scheduled time (ISO 8601, UTC) of the tick of ``job_qn`` beat sends now."""
    return latest_tick(parse_cron(expression, job_qn), dt.datetime.now(dt.UTC)).isoformat()


def sent_now() -> str:
    """When beat sends a tick (ISO 8601, UTC): a tick sent long after its scheduled time is
    one beat missed while it was down."""
    return dt.datetime.now(dt.UTC).isoformat()


def ticks_between(
    schedule: crontab, since: dt.datetime, until: dt.datetime, *, limit: int
) -> list[dt.datetime]:
    """The times ``schedule`` matches after ``since``, up to and including ``until``
    (UTC minutes), oldest first: the newest ``limit`` of them."""
    found: list[dt.datetime] = []
    moment = until
    while len(found) < limit:
        tick = latest_tick(schedule, moment)
        if tick <= since:
            break
        found.append(tick)
        moment = tick - dt.timedelta(minutes=1)
    return found[::-1]
