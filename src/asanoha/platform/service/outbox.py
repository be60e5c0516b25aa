"""The transactional outbox: a job is a row written with the write, published after commit.

The row is the job's record (payload, headers, state, attempt); what reaches the broker is a
pointer to it: the row id as the task id and the number of the attempt to run.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection, delete, func, insert, select, update

from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.outbox")

#: Seconds a fresh row is left to its writer (which publishes it right after commit) before
#: the relay may take it: a younger row is most likely being published right now.
RELAY_GRACE = 5.0
#: Job row states. ``pending``: waiting for its next attempt; ``running``: an attempt is
#: claimed; ``succeeded`` / ``failed``: finished for good.
PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"
FINISHED_STATES = (SUCCEEDED, FAILED)


@dataclass(frozen=True)
class OutboxMessage:
    """One job enqueue. Its ``id`` is also the task id, so a republish is the same job.

    ``payload``, ``headers`` and ``trigger_result`` are written to the row; only ``id``,
    ``job_qn``, ``attempt`` and ``countdown`` are published.
    """

    id: uuid.UUID
    job_qn: str
    payload: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    #: Enqueue at most once per key (see ``find_enqueued``).
    idempotency_key: str | None = None
    #: The triggering write handler's result (JSON-safe), for ``ctx.trigger.result``.
    trigger_result: Any = None
    #: The attempt the message asks a worker to run (1-based).
    attempt: int = 1
    #: Seconds the broker holds the message before delivering it.
    countdown: float = 0.0


class OutboxPublisher(Protocol):
    """Sends an outbox message to the broker. Raising leaves the row for the relay."""

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raise when the broker did not take it."""


def write_outbox(conn: Connection, tables: Tables, messages: Sequence[OutboxMessage]) -> None:
    """Insert ``messages`` as pending job rows in the caller's transaction."""
    if not messages:
        return
    now = dt.datetime.now(dt.UTC)
    relay_after = now + dt.timedelta(seconds=RELAY_GRACE)
    conn.execute(
        insert(tables.outbox),
        [
            {
                "id": message.id,
                "job_qn": message.job_qn,
                "payload": message.payload,
                "headers": message.headers,
                "trigger_result": message.trigger_result,
                "state": PENDING,
                "attempt": 0,
                "not_before": now,
                "relay_after": relay_after,
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
    """Publish committed ``messages`` and note on each row whether the broker took it.

    Returns how many it took. A row whose publish failed becomes due for the relay at once.
    """
    if publisher is None or not messages:
        return 0
    sent, failed = _publish_each(publisher, messages)
    mark_published(database, tables, sent, failed)
    return len(sent)


def mark_published(
    database: Database,
    tables: Tables,
    sent: Sequence[OutboxMessage],
    failed: Sequence[OutboxMessage],
) -> None:
    """Record the outcome of publishing each message's attempt on its row.

    Only a row still waiting for exactly that attempt is marked: a worker may have claimed
    and even ended the attempt before the publisher got here, and the mark must not land
    on the next attempt.
    """
    if not sent and not failed:
        return
    outbox = tables.outbox
    with database.begin() as conn:
        for messages, values in (
            (sent, {"published_at": func.now()}),
            (failed, {"relay_after": func.now()}),
        ):
            for attempt in sorted({message.attempt for message in messages}):
                ids = [message.id for message in messages if message.attempt == attempt]
                conn.execute(
                    update(outbox)
                    .where(
                        outbox.c.id.in_(ids),
                        outbox.c.state == PENDING,
                        outbox.c.attempt == attempt - 1,
                    )
                    .values(publish_attempts=outbox.c.publish_attempts + 1, **values)
                )


def relay_outbox(
    database: Database,
    tables: Tables,
    publisher: OutboxPublisher,
    *,
    limit: int,
    republish_after: float | None = None,
) -> int:
    """Publish pending job rows nobody published and that are due; return how many were sent.

    Due: a publish failed, the writer did not publish within ``RELAY_GRACE``, or a retry held
    in the database reached its time. With ``republish_after``, also a pending row published
    that long ago and still not claimed: its message was lost (a broker restarted without
    persistence); a copy that was not lost is acknowledged unrun by the claim. Rows are
    locked, skipping locked ones, so the relays of a worker fleet share the work instead of
    sending a row twice.
    """
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    due = outbox.c.published_at.is_(None) & (outbox.c.relay_after <= now)
    if republish_after is not None:
        lost_before = now - dt.timedelta(seconds=republish_after)
        due = due | (outbox.c.published_at < lost_before)
    query = (
        select(outbox.c.id, outbox.c.job_qn, outbox.c.attempt, outbox.c.not_before)
        .where(outbox.c.state == PENDING, due)
        .order_by(outbox.c.relay_after)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    with database.begin() as conn:
        rows = conn.execute(query).all()
        if not rows:
            return 0
        messages = [
            OutboxMessage(
                id=uuid.UUID(str(row.id)),
                job_qn=row.job_qn,
                attempt=row.attempt + 1,
                countdown=max(0.0, (row.not_before - now).total_seconds()),
            )
            for row in rows
        ]
        sent, failed = _publish_each(publisher, messages)
        if sent:
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_([message.id for message in sent]))
                .values(published_at=func.now(), publish_attempts=outbox.c.publish_attempts + 1)
            )
        if failed:
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_([message.id for message in failed]))
                .values(publish_attempts=outbox.c.publish_attempts + 1)
            )
    return len(sent)


def _publish_each(
    publisher: OutboxPublisher, messages: Sequence[OutboxMessage]
) -> tuple[list[OutboxMessage], list[OutboxMessage]]:
    sent: list[OutboxMessage] = []
    failed: list[OutboxMessage] = []
    for message in messages:
        try:
            publisher.publish(message)
        except Exception:
            # The row stays pending and unpublished; the relay sends it once the broker is back.
            log.warning(
                "publishing %s (%s) attempt %d failed; left for the relay",
                message.job_qn,
                message.id,
                message.attempt,
                exc_info=True,
            )
            failed.append(message)
        else:
            sent.append(message)
    return sent, failed


def count_unpublished(conn: Connection, tables: Tables) -> int:
    """How many pending job rows wait to be published."""
    outbox = tables.outbox
    query = (
        select(func.count())
        .select_from(outbox)
        .where(outbox.c.state == PENDING, outbox.c.published_at.is_(None))
    )
    return int(conn.execute(query).scalar_one())


def count_unfinished(conn: Connection, tables: Tables) -> int:
    """How many job rows are pending or running: work that is not settled."""
    outbox = tables.outbox
    query = select(func.count()).select_from(outbox).where(outbox.c.state.in_((PENDING, RUNNING)))
    return int(conn.execute(query).scalar_one())


@dataclass(frozen=True)
class DueBacklog:
    """The due job rows nobody has published: what ``/health/ready`` and the
    ``asanoha_outbox_due_*`` metrics report."""

    #: How many there are.
    rows: int
    #: Seconds the oldest has waited since its attempt could start (0 when there is none).
    oldest_age: float


def due_backlog(conn: Connection, tables: Tables) -> DueBacklog:
    """The due, unpublished job rows, in one statement, as the relay sees them.

    Due: pending, unpublished, its attempt may start (``not_before``; a retry waiting in the
    row for its backoff is not late) and the relay may take it (``relay_after``; a fresh
    row is left to its writer, which publishes it right after commit).
    """
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    query = select(func.min(outbox.c.not_before), func.count()).where(
        outbox.c.state == PENDING,
        outbox.c.published_at.is_(None),
        outbox.c.not_before <= now,
        outbox.c.relay_after <= now,
    )
    oldest, rows = conn.execute(query).one()
    if oldest is None:
        return DueBacklog(int(rows), 0.0)
    if oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=dt.UTC)
    return DueBacklog(int(rows), max(0.0, (now - oldest).total_seconds()))


def prune_finished(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """Delete finished job rows, and run rows, that ended before ``before``; return the
    number of job rows deleted."""
    outbox, runs = tables.outbox, tables.job_runs
    deleted = conn.execute(
        delete(outbox).where(outbox.c.state.in_(FINISHED_STATES), outbox.c.finished_at < before)
    ).rowcount
    conn.execute(delete(runs).where(runs.c.finished_at < before))
    return int(deleted or 0)
