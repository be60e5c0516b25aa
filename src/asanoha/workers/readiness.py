"""Readiness checks of the Celery side, for ``/health/ready``."""

from __future__ import annotations

from celery import Celery

from asanoha.platform.service.outbox import due_backlog
from asanoha.platform.store import Database, Tables

#: Seconds a readiness probe waits for the broker.
BROKER_CHECK_TIMEOUT = 2.0
#: Seconds a due job may wait unpublished before the process reports itself not ready: a
#: worker's relay publishes due rows every second, so a longer wait means no relay runs or
#: the broker refuses messages.
JOB_BACKLOG_LIMIT = 60.0


def check_broker(celery: Celery) -> str:
    """``"ok"`` when a connection to the broker opens, else the error text."""
    try:
        with celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0.1, timeout=BROKER_CHECK_TIMEOUT)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def check_job_backlog(database: Database, tables: Tables) -> str:
    """``"ok"`` unless the oldest due, unpublished job has waited longer than
    ``JOB_BACKLOG_LIMIT``; then the error names its age."""
    try:
        with database.connect() as conn:
            age = due_backlog(conn, tables).oldest_age
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    if age > JOB_BACKLOG_LIMIT:
        return (
            f"error: the oldest due job has waited {age:.0f} s to be published "
            "(is an asanoha worker running? does the broker take messages?)"
        )
    return "ok"
