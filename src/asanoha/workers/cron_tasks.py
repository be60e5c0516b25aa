"""The tasks beat runs: enqueue a cron job through the outbox, prune finished job rows."""

from __future__ import annotations

import logging
import uuid

from celery import Celery
from sqlalchemy.exc import IntegrityError

from asanoha.platform.errors import ConflictError
from asanoha.platform.model import SessionUser
from asanoha.platform.service import Service
from asanoha.platform.service.idempotency import prune_expired
from asanoha.platform.service.job_operations import prune_job_rows
from asanoha.platform.service.outbox import find_enqueued
from asanoha.platform.settings import Settings
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME, cron_tick_key

log = logging.getLogger("asanoha.cron")


def register_cron_tasks(celery: Celery, service: Service, settings: Settings) -> None:
    """Register ``asanoha.cron`` and ``asanoha.prune-jobs`` on ``celery``."""

    @celery.task(name=CRON_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def enqueue_cron_job(job_qn: str, tick: str | None = None) -> str:
        # ``tick``: the scheduled time beat computed (a message of an older beat has none,
        # and is enqueued unkeyed).
        return str(enqueue_cron_tick(service, settings, job_qn, tick))

    @celery.task(name=PRUNE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def prune_jobs() -> int:
        days = settings.job_retention_days
        with service.database.begin() as conn:
            deleted = prune_job_rows(conn, service.tables, days)
            keys = prune_expired(conn, service.tables)
        log.info("pruned %d finished job rows older than %g days", deleted, days)
        log.info("pruned %d idempotency keys older than ASANOHA_IDEMPOTENCY_TTL", keys)
        return deleted


def enqueue_cron_tick(
    service: Service, settings: Settings, job_qn: str, tick: str | None
) -> uuid.UUID:
    """Enqueue the tick ``tick`` of the cron job ``job_qn`` once, as the default tenant's
    system user; return its job row's id (the first enqueue's, when another beat's copy of
    the tick came first).

    The row's idempotency key is (job, tick): a second enqueue finds the first row, and
    two at the same moment meet at the key's unique index, where the second one's
    transaction fails and it reads the row the first committed.
    """
    user = SessionUser.system(settings.default_tenant)
    key = None if tick is None else cron_tick_key(job_qn, tick)
    try:
        return service.enqueue_job(
            job_qn, {}, user, trigger_name="cron", manual=False, idempotency_key=key
        )
    except (ConflictError, IntegrityError):
        if key is None:
            raise
        with service.database.connect() as conn:
            found = find_enqueued(conn, service.tables, key)
        if found is None:
            raise
        log.info("%s: the tick %s was enqueued by another beat already", job_qn, tick)
        return found
