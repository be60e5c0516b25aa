"""Enqueue: placing a job row as its job's rules say. The only inserts of the job-row table.

Every enqueue path (write-triggered, event-triggered, cron, manual, ``ctx.dispatch``, the CLI,
the admin handlers, an operator's retry) comes through here, in the enqueuer's transaction, so
that ``skip``, ``replace``, ``debounce`` and ``unique_for`` hold on all of them and across a
fleet: enqueues of one key take a transaction lock on it (an advisory lock on Postgres; SQLite
serialises writers already), look at the key's rows and write accordingly. ``sequential`` and
``max_per_tenant`` only mark the row; its claims enforce them (``attempts.JobRows.claim``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, insert, or_, select, update

from asanoha.platform.jobs import clocks, guards
from asanoha.platform.jobs.clocks import relay_time
from asanoha.platform.jobs.control import cancel_key
from asanoha.platform.jobs.key_locks import lock_keys
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import PENDING, RUNNING, SUCCEEDED, WAITING_TOKEN
from asanoha.platform.model import JobDef
from asanoha.platform.model.concurrency import key_value, stored_key, tenant_slot_key
from asanoha.platform.personal.vault import seal_carried, seal_known
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
    message = keyed(job, message)
    if job is None or message.concurrency_key is None:
        write_outbox(conn, tables, [message])
        return Placement(message.id, message)
    key = message.concurrency_key
    lock_keys(conn, [key])
    existing = answering_row(conn, tables, job, key)
    if existing is not None:
        return Placement(existing, None)
    if job.concurrency.mode == "replace":
        cancel_key(conn, tables, key)
    elif job.concurrency.mode == "debounce":
        return _debounce(conn, tables, message, job.concurrency.seconds or 0.0)
    elif (
        job.concurrency.mode == "sequential"
        and message.by_broker
        and message.countdown <= 0
        and _key_busy(conn, tables, key)
    ):
        # Its claim would find the key busy: the row waits unpublished from the start, and
        # the end that frees the key wakes it (one delivery per row, not one to find the
        # key busy and another when woken).
        write_outbox(conn, tables, [message], waiting=True)
        return Placement(message.id, None)
    write_outbox(conn, tables, [message])
    return Placement(message.id, message)


def keyed(job: JobDef | None, message: OutboxMessage) -> OutboxMessage:
    """``message`` with the keys its job's rules read: the per-tenant slot key
    (``max_per_tenant``) and the concurrency key (a keyed mode)."""
    if job is None or not (job.keyed or job.max_per_tenant is not None):
        return message
    tenant = str(message.headers.get("tenant_id") or "")
    if job.max_per_tenant is not None:
        message = dataclasses.replace(message, slot_key=tenant_slot_key(job.qn, tenant))
    if job.keyed:
        key = stored_key(job.qn, tenant, key_value(job.concurrency, message.payload))
        message = dataclasses.replace(message, concurrency_key=key)
    return message


def answering_row(
    conn: Connection,
    tables: Tables,
    job: JobDef,
    key: str,
    *,
    other_than: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """The row of ``key`` that answers an enqueue instead of a new one (``skip``: a pending
    or running row; ``unique_for``: one created within its window that did not fail), or
    ``None``. The caller holds the key's lock. ``other_than``: a row that does not count
    (the failed row an operator retries)."""
    if job.concurrency.mode == "skip":
        return _first_row(conn, tables, key, (PENDING, RUNNING), other_than=other_than)
    if job.unique_for is not None:
        since = clocks.now() - dt.timedelta(seconds=job.unique_for)
        return _first_row(
            conn, tables, key, (PENDING, RUNNING, SUCCEEDED), since=since, other_than=other_than
        )
    return None


def write_outbox(
    conn: Connection,
    tables: Tables,
    messages: Sequence[OutboxMessage],
    *,
    waiting: bool = False,
) -> None:
    """Insert ``messages`` as pending job rows in the caller's transaction. ``waiting``:
    rows that wait for their key (``guards.waiting``), woken by the end that frees it; the
    relay sends them only should that wake be lost (``clocks.WAKE_LOST_AFTER``)."""
    if not messages:
        return
    now = clocks.now()
    rows = []
    for message in messages:
        not_before = now + dt.timedelta(seconds=message.countdown)
        relay_after = (
            now + dt.timedelta(seconds=clocks.WAKE_LOST_AFTER)
            if waiting
            else relay_time(not_before, by_broker=message.by_broker)
        )
        rows.append(
            {
                "id": message.id,
                "job_qn": message.job_qn,
                # A personal value the transaction wrote or read is stored as its ciphertext.
                "payload": sealed(conn, message.payload),
                "headers": message.headers,
                "trigger_result": sealed(conn, message.trigger_result),
                "state": PENDING,
                "attempt": 0,
                "not_before": not_before,
                # Its writer publishes it right after commit; held in the row, the relay
                # publishes it once it is due.
                "relay_after": relay_after,
                "claim_token": WAITING_TOKEN if waiting else None,
                "created_at": now,
                "publish_attempts": 0,
                "idempotency_key": message.idempotency_key,
                "priority": message.priority,
                "concurrency_key": message.concurrency_key,
                "slot_key": message.slot_key,
            }
        )
    conn.execute(insert(tables.outbox), rows)


def sealed(conn: Connection, value: Any) -> Any:
    """``value`` as a job row stores it: every personal value ``conn``'s transaction sealed
    or opened replaced by its sealed text (a payload, a workflow run's payload, a step's
    result)."""
    return seal_known(conn, value)


def sealed_detached(engine: Engine, value: Any) -> Any:
    """``sealed`` for a statement sent outside SQLAlchemy's connections, on ``engine``'s
    database (a step's result on the end of its attempt): every personal value the
    attempt carries replaced by its sealed text, as in a transaction that opened none."""
    return seal_carried(engine, value)


def _key_busy(conn: Connection, tables: Tables, key: str) -> bool:
    """Whether a claim of a new row of the ``sequential`` key ``key`` would find it busy:
    an attempt of it running, or an older row of it due (see ``attempts.JobRows``)."""
    outbox = tables.outbox
    busy = or_(
        outbox.c.state == RUNNING,
        and_(outbox.c.state == PENDING, guards.due(outbox, clocks.now())),
    )
    query = select(outbox.c.id).where(outbox.c.concurrency_key == key, busy).limit(1)
    return conn.execute(query).first() is not None


def _first_row(
    conn: Connection,
    tables: Tables,
    key: str,
    states: tuple[str, ...],
    since: dt.datetime | None = None,
    other_than: uuid.UUID | None = None,
) -> uuid.UUID | None:
    outbox = tables.outbox
    query = select(outbox.c.id).where(guards.live_of_key(outbox, key, states))
    if since is not None:
        query = query.where(guards.created_since(outbox, since))
    if other_than is not None:
        query = query.where(outbox.c.id != other_than)
    found = conn.execute(query.order_by(outbox.c.created_at, outbox.c.id).limit(1)).scalar()
    return None if found is None else uuid.UUID(str(found))


def _debounce(
    conn: Connection, tables: Tables, message: OutboxMessage, seconds: float
) -> Placement:
    """Collapse ``message`` into the key's row whose window is open (pending, never run,
    not yet published), moving its start to ``seconds`` from now and giving it this payload;
    else write a new row that waits ``seconds`` in the database (the relay publishes it when
    its window closes)."""
    outbox = tables.outbox
    now = clocks.now()
    not_before = now + dt.timedelta(seconds=seconds)
    query = (
        select(outbox.c.id)
        .where(
            outbox.c.concurrency_key == message.concurrency_key,
            guards.pending_at(outbox, 0),
            guards.unpublished(outbox),
            guards.not_due(outbox, now),
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
