"""The tasks beat runs: enqueue a cron job through the outbox, prune finished job rows, prune
the events past their type's ``keep_for=`` and the streams closed by forget."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from celery import Celery
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from asanoha.platform.errors import ConflictError, Reasons
from asanoha.platform.model import JobDef, SessionUser
from asanoha.platform.service import Service, cron_ticks
from asanoha.platform.service.cron_ticks import cron_tick_key
from asanoha.platform.service.idempotency import prune_expired
from asanoha.platform.service.job_operations import prune_job_rows
from asanoha.platform.service.outbox import find_enqueued
from asanoha.platform.settings import Settings
from asanoha.platform.store.retention import declared_retention, forget_markers, prune_events
from asanoha.workers.beat import (
    CRON_TASK_NAME,
    PRUNE_EVENTS_TASK_NAME,
    PRUNE_TASK_NAME,
    parse_cron,
    ticks_between,
)

log = logging.getLogger("asanoha.cron")

#: Seconds past its scheduled time a tick may be sent and still count as on time: beat sends
#: ticks on time while it runs; a later one is a tick it missed while it was down.
ON_TIME = 60.0
#: Missed ticks a ``catch_up=True`` job replays at most at once.
MAX_CATCH_UP = 1000
#: Retries of a tick task whose database failed, backing off up to this many seconds apart.
TICK_RETRIES = 8
TICK_RETRY_MAX_SECONDS = 300

Tenants = Callable[[], Iterable[str]]


def register_cron_tasks(
    celery: Celery, service: Service, settings: Settings, tenants: Tenants | None = None
) -> None:
    """Register ``asanoha.cron``, ``asanoha.prune-jobs`` and ``asanoha.prune-events`` on
    ``celery``."""

    @celery.task(  # type: ignore[untyped-decorator]
        name=CRON_TASK_NAME,
        ignore_result=True,
        shared=False,
        # A tick whose fan-out failed (the database) stays open: the retry completes it,
        # else the job's next tick does (see ``service/cron_ticks.py``).
        autoretry_for=(SQLAlchemyError, OSError),
        max_retries=TICK_RETRIES,
        retry_backoff=True,
        retry_backoff_max=TICK_RETRY_MAX_SECONDS,
    )
    def enqueue_cron_job(job_qn: str, tick: str | None = None, sent: str | None = None) -> int:
        # ``tick``: the scheduled time beat computed, ``sent``: when beat sent it (a message
        # of an older beat has neither, and is enqueued unkeyed).
        return len(enqueue_cron_tick(service, settings, job_qn, tick, sent=sent, tenants=tenants))

    @celery.task(name=PRUNE_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def prune_jobs() -> int:
        days = settings.job_retention_days
        with service.database.begin() as conn:
            deleted = prune_job_rows(conn, service.tables, days)
            keys = prune_expired(conn, service.tables)
            before = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
            ticks = cron_ticks.prune_ticks(conn, service.tables, before)
        uploads = service.files.prune_unattached(
            dt.datetime.now(dt.UTC) - dt.timedelta(hours=settings.file_unattached_hours)
        )
        log.info("pruned %d finished job rows older than %g days", deleted, days)
        log.info("pruned %d uploads no write took within ASANOHA_FILE_UNATTACHED_HOURS", uploads)
        log.info("pruned %d idempotency keys older than ASANOHA_IDEMPOTENCY_TTL", keys)
        log.info("pruned %d cron ticks (each job's newest is kept)", ticks)
        return deleted

    @celery.task(name=PRUNE_EVENTS_TASK_NAME, ignore_result=True, shared=False)  # type: ignore[untyped-decorator]
    def prune_old_events() -> int:
        return prune_declared_events(service, settings)


def prune_declared_events(service: Service, settings: Settings) -> int:
    """Delete (archive first, with ``ASANOHA_EVENT_ARCHIVE_DIR``) the events of each type
    declared with ``keep_for=`` that are older than it, and the events of the entity streams
    closed by forget; how many. While a consumer has not handled them, nothing is deleted
    and the warning names it: the next day's prune tries again (a failed task would only be
    retried into the same refusal)."""
    keep_for = declared_retention(service.registry)
    markers = forget_markers(service.registry)
    if not keep_for and not markers:
        return 0
    archive = settings.event_archive_dir
    try:
        with service.database.begin() as conn:
            result = prune_events(
                conn,
                service.tables,
                keep_for=keep_for,
                forgotten=markers,
                archive_dir=None if archive is None else Path(archive),
            )
    except ConflictError as refused:
        if refused.reason != Reasons.CONSUMER_LAG:
            raise
        log.warning("no events pruned: %s", refused.message)
        return 0
    kept = f"; archived to {result.archive}" if result.archive else ""
    log.info("pruned %d event(s) past their keep_for or of %d stream(s) closed by forget, "
             "up to position %d%s", result.pruned, result.closed_streams, result.cut,
             kept)  # fmt: skip
    return result.pruned


def enqueue_cron_tick(
    service: Service,
    settings: Settings,
    job_qn: str,
    tick: str | None,
    *,
    sent: str | None = None,
    tenants: Tenants | None = None,
) -> list[uuid.UUID]:
    """Enqueue the tick ``tick`` of the cron job ``job_qn`` once (once per tenant of
    ``tenants`` for a ``per_tenant`` job, else as the default tenant's system user); return
    the job rows' ids (the first enqueue's, when another beat's copy of the tick came first).

    Each tick is recorded open, then its rows are placed and it is closed in one transaction
    (see ``service/cron_ticks.py``): a tick whose fan-out failed part-way is fanned out by the
    job's next tick, or by this task's retry, once for every tenant.

    A tick beat sent more than ``ON_TIME`` seconds after its time (``sent``) is one it
    missed while it was down: it is not run, unless the job says ``catch_up=True``, which
    runs every tick since the last one recorded.
    """
    job = service.registry.job(job_qn)
    if job is None or tick is None:
        # A message of an older beat (no tick) or a job no longer declared: enqueued unkeyed.
        return [
            service.enqueue_job(
                job_qn, {}, SessionUser.system(tenant), trigger_name="cron", manual=False
            )
            for tenant in _tenants_of(job, settings, tenants)
        ]
    for unfinished in cron_ticks.open_ticks(service, job_qn):
        if unfinished != tick:
            log.warning("%s: the tick of %s was not fanned out to every tenant; completing it",
                        job_qn, unfinished)  # fmt: skip
            _fan_out(service, settings, job, unfinished, tenants)
    ticks = [tick]
    if sent is not None and _late(tick, sent):
        if not job.catch_up:
            log.info("%s: the tick of %s was missed (beat was down); not replayed "
                     "(catch_up=False)", job_qn, tick)  # fmt: skip
            return []
        ticks = _missed_ticks(service, job, tick)
    return [job_id for each in ticks for job_id in _fan_out(service, settings, job, each, tenants)]


def _fan_out(
    service: Service, settings: Settings, job: JobDef, tick: str, tenants: Tenants | None
) -> list[uuid.UUID]:
    cron_ticks.open_tick(service, job.qn, tick)
    return cron_ticks.fan_out_tick(
        service, job.qn, tick, _tenants_of(job, settings, tenants), per_tenant=job.per_tenant
    )


def enqueue_once(
    service: Service, job_qn: str, user: SessionUser, key: str | None, *, trigger_name: str
) -> uuid.UUID:
    """Enqueue ``job_qn`` as ``user`` once per ``key``; return its job row's id.

    The row's idempotency key is ``key``: a second enqueue finds the first row, and two at
    the same moment meet at the key's unique index, where the second one's transaction fails
    and it reads the row the first committed.
    """
    try:
        return service.enqueue_job(
            job_qn, {}, user, trigger_name=trigger_name, manual=False, idempotency_key=key
        )
    except (ConflictError, IntegrityError):
        if key is None:
            raise
        with service.database.connect() as conn:
            found = find_enqueued(conn, service.tables, key)
        if found is None:
            raise
        log.info("%s: %s was enqueued by another process already", job_qn, key)
        return found


def _tenants_of(job: JobDef | None, settings: Settings, tenants: Tenants | None) -> list[str]:
    if job is None or not job.per_tenant or tenants is None:
        return [settings.default_tenant]
    return sorted({str(tenant) for tenant in tenants()})


def _late(tick: str, sent: str) -> bool:
    try:
        late = dt.datetime.fromisoformat(sent) - dt.datetime.fromisoformat(tick)
    except ValueError:
        return False
    return late.total_seconds() > ON_TIME


def _missed_ticks(service: Service, job: JobDef, tick: str) -> list[str]:
    """The ticks of ``job`` after the newest one recorded, up to ``tick`` (at most
    ``MAX_CATCH_UP``, the newest ones)."""
    newest = cron_ticks.newest_tick(service, job.qn) or _newest_tick_row(service, job)
    until = dt.datetime.fromisoformat(tick)
    if newest is None or job.cron is None:
        return [tick]
    since = dt.datetime.fromisoformat(newest)
    found = ticks_between(parse_cron(job.cron, job.qn), since, until, limit=MAX_CATCH_UP)
    return [moment.isoformat() for moment in found] or [tick]


def _newest_tick_row(service: Service, job: JobDef) -> str | None:
    """The newest tick of ``job`` among its job rows: ticks enqueued before they were
    recorded in ``asanoha_cron_ticks`` (an earlier release)."""
    outbox = service.tables.outbox
    prefix = cron_tick_key(job.qn, "")
    query = (
        select(outbox.c.idempotency_key)
        .where(outbox.c.job_qn == job.qn, outbox.c.idempotency_key.like(f"{prefix}%"))
        .order_by(outbox.c.created_at.desc())
        .limit(1)
    )
    with service.database.connect() as conn:
        newest = conn.execute(query).scalar()
    return None if newest is None else str(newest).removeprefix(prefix).split("@", 1)[0]
