"""The tasks beat runs: enqueue a cron job through the outbox, prune finished job rows."""

from __future__ import annotations

import logging

from celery import Celery

from asanoha.platform.model import SessionUser
from asanoha.platform.service import Service
from asanoha.platform.service.idempotency import prune_expired
from asanoha.platform.service.job_operations import prune_job_rows
from asanoha.platform.settings import Settings
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME

log = logging.getLogger("asanoha.cron")


def register_cron_tasks(celery: Celery, service: Service, settings: Settings) -> None:
    """Register ``asanoha.cron`` and ``asanoha.prune-jobs`` on ``celery``."""

    @celery.task(name=CRON_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def enqueue_cron_job(job_qn: str) -> str:
        user = SessionUser.system(settings.default_tenant)
        return str(service.enqueue_job(job_qn, {}, user, trigger_name="cron", manual=False))

    @celery.task(name=PRUNE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def prune_jobs() -> int:
        days = settings.job_retention_days
        with service.database.begin() as conn:
            deleted = prune_job_rows(conn, service.tables, days)
            keys = prune_expired(conn, service.tables)
        log.info("pruned %d finished job rows older than %g days", deleted, days)
        log.info("pruned %d idempotency keys older than ASANOHA_IDEMPOTENCY_TTL", keys)
        return deleted
