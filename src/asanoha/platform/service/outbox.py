"""The transactional outbox: job enqueues written with the write, published after commit."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, func, insert, select, update

from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.outbox")


@dataclass(frozen=True)
class OutboxMessage:
    """One job enqueue. Its ``id`` is also the task id, so a republish is the same job."""

    id: uuid.UUID
    job_qn: str
    payload: dict[str, Any]
    headers: dict[str, Any]
    #: Enqueue at most once per key (see ``find_enqueued``).
    idempotency_key: str | None = None


class OutboxPublisher(Protocol):
    """Sends an outbox message to the broker. Raising leaves the row for the relay."""

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raise when the broker did not take it."""


def write_outbox(conn: Connection, tables: Tables, messages: Sequence[OutboxMessage]) -> None:
    """Insert ``messages`` in the caller's transaction."""
    if not messages:
        return
    now = dt.datetime.now(dt.UTC)
    conn.execute(
        insert(tables.outbox),
        [
            {
                "id": message.id,
                "job_qn": message.job_qn,
                "payload": message.payload,
                "headers": message.headers,
                "created_at": now,
                "publish_attempts": 0,
                "idempotency_key": message.idempotency_key,
            }
            for message in messages
        ],
    )


def find_enqueued(conn: Connection, tables: Tables, idempotency_key: str) -> uuid.UUID | None:
    """The id of the job enqueued with ``idempotency_key``, if there is one.

    Callers that enqueue with a key serialise themselves (the job-trigger consumer holds its
    cursor row); the unique index on the key catches anyone who does not.
    """
    outbox = tables.outbox
    query = select(outbox.c.id).where(outbox.c.idempotency_key == idempotency_key)
    found = conn.execute(query).scalar_one_or_none()
    return None if found is None else uuid.UUID(str(found))


def publish_messages(
    database: Database,
    tables: Tables,
    publisher: OutboxPublisher | None,
    messages: Sequence[OutboxMessage],
) -> int:
    """Publish committed ``messages`` and mark the ones the broker took; return that count."""
    if publisher is None or not messages:
        return 0
    sent: list[uuid.UUID] = []
    failed: list[uuid.UUID] = []
    for message in messages:
        try:
            publisher.publish(message)
        except Exception:
            # The row stays unpublished; the relay sends it once the broker is back.
            log.warning(
                "publishing %s (%s) failed; left for the relay",
                message.job_qn,
                message.id,
                exc_info=True,
            )
            failed.append(message.id)
        else:
            sent.append(message.id)
    with database.begin() as conn:
        outbox = tables.outbox
        if sent:
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_(sent))
                .values(published_at=func.now(), publish_attempts=outbox.c.publish_attempts + 1)
            )
        if failed:
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_(failed))
                .values(publish_attempts=outbox.c.publish_attempts + 1)
            )
    return len(sent)


def relay_outbox(
    database: Database, tables: Tables, publisher: OutboxPublisher, *, limit: int, grace: float
) -> int:
    """Publish rows left unpublished; return how many the broker took.

    A row is due once a publish of it failed, or ``grace`` seconds after it was written: a
    younger row is most likely being published by its writer right now, and taking it too
    would send the job twice. Rows are locked (skipping locked ones) so relays do not race.
    """
    outbox = tables.outbox
    due_before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=grace)
    query = (
        select(outbox.c.id, outbox.c.job_qn, outbox.c.payload, outbox.c.headers)
        .where(
            outbox.c.published_at.is_(None),
            (outbox.c.publish_attempts > 0) | (outbox.c.created_at < due_before),
        )
        .order_by(outbox.c.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    sent = 0
    with database.begin() as conn:
        for row in conn.execute(query).mappings().all():
            message = OutboxMessage(**row)
            try:
                publisher.publish(message)
            except Exception:
                log.warning("relaying %s (%s) failed", message.job_qn, message.id, exc_info=True)
                values: dict[str, Any] = {}
            else:
                values = {"published_at": func.now()}
                sent += 1
            conn.execute(
                update(outbox)
                .where(outbox.c.id == message.id)
                .values(publish_attempts=outbox.c.publish_attempts + 1, **values)
            )
    return sent


def count_unpublished(conn: Connection, tables: Tables) -> int:
    """How many outbox rows still wait to be published."""
    outbox = tables.outbox
    query = select(func.count()).select_from(outbox).where(outbox.c.published_at.is_(None))
    return int(conn.execute(query).scalar_one())
