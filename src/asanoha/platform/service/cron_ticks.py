"""The record of each cron tick: opened before its job rows are placed, closed with them.

A tick of a cron job is *opened* (a row keyed by job and scheduled time, committed on its own)
before any job row of it is placed, and *closed* in the one transaction that places its job
rows, one per tenant for a ``per_tenant`` job. So a fan-out that fails part-way (the database
errors after some tenants) leaves no tenant's row and the tick open; the job's next tick, or
the tick task's retry, fans it out again. The close is a guarded update (``done_at IS NULL``),
so of two processes fanning out the same tick one places the rows and the other, waiting on
the row's lock, finds it closed: never twice for a tenant.

The newest tick of each job is also what ``catch_up`` replays from. It lives here and not only
in the job rows, which the hourly prune deletes: ``prune_ticks`` keeps each job's newest tick
and every open one, whatever their age.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from asanoha.platform.model import SessionUser
from asanoha.platform.service.dispatch import Service
from asanoha.platform.service.outbox import find_enqueued
from asanoha.platform.service.request import Request
from asanoha.platform.store.tables import Tables


def cron_tick_key(job_qn: str, tick: str, tenant: str | None = None) -> str:
    """The idempotency key of a cron tick's job row: one row per (job, scheduled time), and
    per tenant for a job that runs per tenant."""
    return f"{job_qn}@cron:{tick}" if tenant is None else f"{job_qn}@cron:{tick}@{tenant}"


def open_tick(service: Service, job_qn: str, tick: str) -> None:
    """Record that the tick ``tick`` of ``job_qn`` is due, in a transaction of its own (a
    no-op when it is recorded already, open or closed)."""
    ticks = service.tables.cron_ticks
    row = {
        "job_qn": job_qn,
        "tick": tick,
        "tick_at": dt.datetime.fromisoformat(tick),
        "opened_at": dt.datetime.now(dt.UTC),
    }
    try:
        with service.database.begin() as conn:
            conn.execute(insert(ticks).values(row))
    except IntegrityError:
        return  # another beat's copy of the tick, or a retry, recorded it first


def open_ticks(service: Service, job_qn: str) -> list[str]:
    """The ticks of ``job_qn`` recorded but not fanned out (a fan-out failed), oldest first."""
    ticks = service.tables.cron_ticks
    query = (
        select(ticks.c.tick)
        .where(ticks.c.job_qn == job_qn, ticks.c.done_at.is_(None))
        .order_by(ticks.c.tick_at)
    )
    with service.database.connect() as conn:
        return [str(tick) for tick in conn.execute(query).scalars()]


def newest_tick(service: Service, job_qn: str) -> str | None:
    """The scheduled time of the newest tick recorded for ``job_qn`` (open or closed)."""
    ticks = service.tables.cron_ticks
    query = (
        select(ticks.c.tick)
        .where(ticks.c.job_qn == job_qn)
        .order_by(ticks.c.tick_at.desc())
        .limit(1)
    )
    with service.database.connect() as conn:
        found = conn.execute(query).scalar()
    return None if found is None else str(found)


def fan_out_tick(
    service: Service, job_qn: str, tick: str, tenants: Sequence[str], *, per_tenant: bool
) -> list[uuid.UUID]:
    """Place the job rows of the open tick ``tick`` of ``job_qn`` (one per tenant of
    ``tenants``; keyed per tenant when ``per_tenant``) and close it, in one transaction;
    return the rows' ids. A tick closed already places nothing and answers the ids of the
    rows its fan-out placed (those still kept)."""
    ticks = service.tables.cron_ticks
    keys = [
        (tenant, cron_tick_key(job_qn, tick, tenant if per_tenant else None)) for tenant in tenants
    ]
    close = (
        update(ticks)
        .where(ticks.c.job_qn == job_qn, ticks.c.tick == tick, ticks.c.done_at.is_(None))
        .values(done_at=dt.datetime.now(dt.UTC))
    )
    ids: list[uuid.UUID] = []
    requests: list[Request] = []
    with service.database.begin() as conn:
        # First, so that a second fan-out of the tick waits here for this one's outcome.
        if conn.execute(close).rowcount != 1:
            return _placed(service, conn, [key for _, key in keys])
        for tenant, key in keys:
            user = SessionUser.system(tenant)
            with service.unit_of_work(user, conn=conn) as request:
                ids.append(
                    service.enqueue_job(
                        job_qn,
                        {},
                        user,
                        parent=request,
                        trigger_name="cron",
                        manual=False,
                        idempotency_key=key,
                    )
                )
            requests.append(request)
    for request in requests:
        service.after_commit(request)
    return ids


def _placed(service: Service, conn: Connection, keys: list[str]) -> list[uuid.UUID]:
    found = (find_enqueued(conn, service.tables, key) for key in keys)
    return [job_id for job_id in found if job_id is not None]


def prune_ticks(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """Delete closed ticks closed before ``before``, but each job's newest tick (what
    ``catch_up`` replays from); return how many went."""
    ticks = tables.cron_ticks
    newer = ticks.alias("newer")
    has_newer = (
        select(func.count())
        .where(newer.c.job_qn == ticks.c.job_qn, newer.c.tick_at > ticks.c.tick_at)
        .scalar_subquery()
    )
    deleted = conn.execute(
        delete(ticks).where(
            and_(ticks.c.done_at.is_not(None), ticks.c.done_at < before, has_newer > 0)
        )
    ).rowcount
    return int(deleted or 0)
