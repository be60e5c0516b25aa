"""What an enqueue does when its job has a concurrency key: the enqueue side of job control.

Every enqueue path (write-triggered, event-triggered, cron, manual, ``ctx.dispatch``, the CLI,
the admin handlers) writes its job rows through ``place``, in the enqueuer's transaction, so
that ``skip``, ``replace``, ``debounce`` and ``unique_for`` hold on all of them and across a
fleet: enqueues of one key take a transaction lock on it (an advisory lock on Postgres; SQLite
serialises writers already), look at the key's rows and write accordingly. ``sequential`` and
``max_per_tenant`` only mark the row; its claims enforce them (``workers.job_rows``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, text, update

from asanoha.platform.model import JobDef
from asanoha.platform.model.concurrency import key_value, stored_key, tenant_slot_key
from asanoha.platform.service.outbox import (
    CANCELLED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    OutboxMessage,
    relay_time,
    write_outbox,
)
from asanoha.platform.store import Tables


@dataclass(frozen=True)
class Placement:
    """Where an enqueue's job ended up: the row's id, and the message to publish after
    commit (``None``: nothing new to publish: an existing row answered, or the row waits in
    the database)."""

    job_id: uuid.UUID
    message: OutboxMessage | None


def place(
    conn: Connection, tables: Tables, job: JobDef | None, message: OutboxMessage
) -> Placement:
    """Write ``message``'s job row as its job's concurrency rules say, in ``conn``'s
    transaction."""
    if job is None or not (job.keyed or job.max_per_tenant is not None):
        write_outbox(conn, tables, [message])
        return Placement(message.id, message)
    tenant = str(message.headers.get("tenant_id") or "")
    if job.max_per_tenant is not None:
        message = dataclasses.replace(message, slot_key=tenant_slot_key(job.qn, tenant))
    if not job.keyed:
        write_outbox(conn, tables, [message])
        return Placement(message.id, message)
    key = stored_key(job.qn, tenant, key_value(job.concurrency, message.payload))
    message = dataclasses.replace(message, concurrency_key=key)
    lock_keys(conn, [key])
    mode = job.concurrency.mode
    if mode == "skip":
        existing = _first_row(conn, tables, key, (PENDING, RUNNING))
        if existing is not None:
            return Placement(existing, None)
    elif job.unique_for is not None:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=job.unique_for)
        existing = _first_row(conn, tables, key, (PENDING, RUNNING, SUCCEEDED), since=since)
        if existing is not None:
            return Placement(existing, None)
    elif mode == "replace":
        _replace_rows(conn, tables, key)
    elif mode == "debounce":
        return _debounce(conn, tables, message, job.concurrency.seconds or 0.0)
    write_outbox(conn, tables, [message])
    return Placement(message.id, message)


def lock_keys(conn: Connection, keys: Iterable[str]) -> None:
    """Hold transaction locks on ``keys`` (stored keys) until ``conn``'s transaction ends,
    in a fixed order (no deadlock between two holders of the same keys). On SQLite the
    write transaction holds the database's one write lock already."""
    if conn.dialect.name != "postgresql":
        return
    for key in sorted(set(keys)):
        conn.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _lock_id(key)})


def _lock_id(key: str) -> int:
    # A signed 64-bit id from the key's digest; the high bit must stay inside a bigint.
    value = int(key[:16], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def _first_row(
    conn: Connection,
    tables: Tables,
    key: str,
    states: tuple[str, ...],
    since: dt.datetime | None = None,
) -> uuid.UUID | None:
    outbox = tables.outbox
    query = select(outbox.c.id).where(outbox.c.concurrency_key == key, outbox.c.state.in_(states))
    if since is not None:
        query = query.where(outbox.c.created_at >= since)
    found = conn.execute(query.order_by(outbox.c.created_at, outbox.c.id).limit(1)).scalar()
    return None if found is None else uuid.UUID(str(found))


def _replace_rows(conn: Connection, tables: Tables, key: str) -> None:
    """Cancel the key's pending rows (they never run) and ask its running attempts to stop."""
    outbox = tables.outbox
    conn.execute(
        update(outbox)
        .where(outbox.c.concurrency_key == key, outbox.c.state == PENDING)
        .values(state=CANCELLED, finished_at=func.now(), claim_token=None)
    )
    conn.execute(
        update(outbox)
        .where(outbox.c.concurrency_key == key, outbox.c.state == RUNNING)
        .values(cancel_requested=True)
    )


def _debounce(
    conn: Connection, tables: Tables, message: OutboxMessage, seconds: float
) -> Placement:
    """Collapse ``message`` into the key's row whose window is open (pending, never run,
    not yet published), moving its start to ``seconds`` from now and giving it this payload;
    else write a new row that waits ``seconds`` in the database (the relay publishes it when
    its window closes)."""
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    not_before = now + dt.timedelta(seconds=seconds)
    query = (
        select(outbox.c.id)
        .where(
            outbox.c.concurrency_key == message.concurrency_key,
            outbox.c.state == PENDING,
            outbox.c.attempt == 0,
            outbox.c.published_at.is_(None),
            outbox.c.not_before > now,
        )
        .order_by(outbox.c.created_at)
        .limit(1)
        .with_for_update()
    )
    open_row = conn.execute(query).scalar()
    if open_row is not None:
        row_id = uuid.UUID(str(open_row))
        conn.execute(
            update(outbox)
            .where(outbox.c.id == row_id)
            .values(
                payload=message.payload,
                headers=message.headers,
                trigger_result=message.trigger_result,
                not_before=not_before,
                relay_after=relay_time(not_before, by_broker=False),
            )
        )
        return Placement(row_id, None)
    held = dataclasses.replace(message, countdown=seconds, by_broker=False)
    write_outbox(conn, tables, [held])
    return Placement(held.id, None)
