"""Checks of the job pipeline, for ``/health/jobs``: each returns ``"ok"`` or a short cause,
and raises when it cannot reach what it checks (the HTTP layer logs that and answers
``unreachable``)."""

from __future__ import annotations

from celery import Celery

from asanoha.platform.service.outbox import count_unclaimed, due_backlog
from asanoha.platform.store import Database, Tables

#: Seconds a check waits for the broker.
BROKER_CHECK_TIMEOUT = 2.0
#: Seconds a due job may wait unpublished before the check fails: a worker's relay publishes
#: due rows every second, so a longer wait means no relay runs or the broker refuses messages.
JOB_BACKLOG_LIMIT = 60.0


def check_broker(celery: Celery) -> str:
    """``"ok"`` when a connection to the broker opens; raises what the connection raised."""
    with celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, interval_start=0.1, timeout=BROKER_CHECK_TIMEOUT)
    return "ok"


def check_job_backlog(database: Database, tables: Tables) -> str:
    """``"ok"`` unless the oldest due, unpublished job has waited longer than
    ``JOB_BACKLOG_LIMIT``; then a cause that names its age."""
    with database.connect() as conn:
        age = due_backlog(conn, tables).oldest_age
    if age > JOB_BACKLOG_LIMIT:
        return f"the oldest due job has waited {age:.0f} s to be published"
    return "ok"


def check_unclaimed_jobs(database: Database, tables: Tables, older_than: float) -> str:
    """``"ok"`` unless published jobs have waited unclaimed longer than ``older_than`` seconds
    (``ASANOHA_UNCLAIMED_ALERT_SECONDS``); then a cause that names how many.

    The broker lost their messages (the relay sends them again after the visibility
    timeout), or the workers are that far behind: the queue's length tells which.
    """
    with database.connect() as conn:
        rows = count_unclaimed(conn, tables, older_than)
    if rows:
        return (
            f"{rows} published job(s) not claimed within {older_than:g} s: "
            "their messages were lost, or the workers are that far behind"
        )
    return "ok"
