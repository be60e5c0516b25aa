"""``dispatch_job``: enqueue a job by hand, through the outbox."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from asanoha.platform.model import SessionUser

if TYPE_CHECKING:
    from asanoha.app import App


def dispatch_job(
    app: App,
    job_qn: str,
    payload: dict[str, Any],
    user: SessionUser | None = None,
    *,
    delay: float | None = None,
    at: dt.datetime | None = None,
    priority: int | None = None,
) -> str:
    """Enqueue ``job_qn`` with ``payload`` as ``user`` (default: the default tenant's system
    user), to start after ``delay`` seconds or at ``at``; return the task id (the job row's
    id)."""
    return str(app.jobs.run(job_qn, payload, user=user, delay=delay, at=at, priority=priority))
