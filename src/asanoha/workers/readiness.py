"""Whether the broker answers, for ``/health/ready``."""

from __future__ import annotations

from celery import Celery

#: Seconds a readiness probe waits for the broker.
BROKER_CHECK_TIMEOUT = 2.0


def check_broker(celery: Celery) -> str:
    """``"ok"`` when a connection to the broker opens, else the error text."""
    try:
        with celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0.1, timeout=BROKER_CHECK_TIMEOUT)
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"
