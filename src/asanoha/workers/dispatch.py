"""``dispatch_job``: enqueue a job by hand, through the outbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asanoha.platform.model import SessionUser

if TYPE_CHECKING:
    from asanoha.app import App


def dispatch_job(
    app: App, job_qn: str, payload: dict[str, Any], user: SessionUser | None = None
) -> str:
    """Enqueue ``job_qn`` with ``payload`` as ``user`` (default: the default tenant's system
    user); return the task id (the job row's id)."""
    caller = user or SessionUser.system(app.settings.default_tenant)
    return str(app.service.enqueue_job(job_qn, payload, caller, trigger_name="manual"))
