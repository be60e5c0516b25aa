"""The transactional outbox, as the service layer sees it: what a caller may ask of a new job
(its delay, its priority), publishing a write's job rows after commit, and the reads that
count rows for health checks, metrics and ``drain()``.

The job row itself (its states, clocks and every write to it) belongs to
``asanoha.platform.jobs``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, not_, or_, select

from asanoha.platform.jobs import clocks, guards
from asanoha.platform.jobs.message import OutboxMessage, OutboxPublisher, publish_each
from asanoha.platform.jobs.publishing import mark_published
from asanoha.platform.jobs.retention import boot_key
from asanoha.platform.jobs.states import CANCELLED, PENDING, RUNNING
from asanoha.platform.store import Database, Tables

__all__ = [
    "DueBacklog",
    "OutboxMessage",
    "OutboxPublisher",
    "boot_key",
    "check_run_priority",
    "count_paused_rows",
    "count_unclaimed",
    "count_unfinished",
    "count_unpublished",
    "due_backlog",
    "find_enqueued",
    "is_cancel_requested",
    "publish_messages",
    "start_delay",
]

log = logging.getLogger("asanoha.outbox")


def start_delay(job_qn: str, delay: float | None = None, at: dt.datetime | None = None) -> float:
    """Seconds until a new job's first attempt may start: ``delay`` seconds, or until
    ``at`` (a time in the past starts at once). Raises ``ValueError`` naming the job for
    both together, a negative or non-finite delay, or a time without a time zone."""
    if delay is not None and at is not None:
        raise ValueError(f"{job_qn}: pass delay= or at=, not both")
    if delay is not None:
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not math.isfinite(delay)
            or delay < 0
        ):
            raise ValueError(f"{job_qn}: delay= is a number of seconds >= 0, not {delay!r}")
        return float(delay)
    if at is not None:
        if not isinstance(at, dt.datetime) or at.tzinfo is None:
            raise ValueError(
                f"{job_qn}: at= is a datetime with a time zone (datetime.now(UTC) + ...), "
                f"not {at!r}"
            )
        return max(0.0, (at - dt.datetime.now(dt.UTC)).total_seconds())
    return 0.0


def check_run_priority(job_qn: str, declared: int | None, priority: int | None) -> None:
    """Refuse a run's ``priority`` outside 0..9, or for a job that declares none (its lane
    queues then take no priorities). Raises ``ValueError`` naming the job."""
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise ValueError(
            f"{job_qn}: priority= is a whole number from 0 (lowest) to 9 (runs first), "
            f"not {priority!r}"
        )
    if declared is None:
        raise ValueError(
            f"{job_qn}: the job declares no priority; declare @feature.job(..., priority=N) "
            "(the default of its runs) to run it with one"
        )


def is_cancel_requested(conn: Connection, tables: Tables, job_id: uuid.UUID) -> bool:
    """Whether the job row ``job_id`` was asked to stop (cancelled, or cancel requested
    while running)."""
    outbox = tables.outbox
    row = conn.execute(
        select(outbox.c.state, outbox.c.cancel_requested).where(outbox.c.id == job_id)
    ).first()
    return row is not None and (row.state == CANCELLED or bool(row.cancel_requested))


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

    Returns how many it took. A row whose publish failed becomes due for the relay at once
    (at its ``not_before``, should that be later: see ``relay_time``).
    """
    messages = [message for message in messages if message.by_broker]
    if publisher is None or not messages:
        return 0
    sent, failed = publish_each(publisher, messages)
    mark_published(database, tables, sent, failed)
    return len(sent)


def count_unpublished(conn: Connection, tables: Tables) -> int:
    """How many pending job rows wait to be published."""
    outbox = tables.outbox
    query = (
        select(func.count())
        .select_from(outbox)
        .where(outbox.c.state == PENDING, outbox.c.published_at.is_(None))
    )
    return int(conn.execute(query).scalar_one())


def count_unfinished(
    conn: Connection,
    tables: Tables,
    paused: Collection[str] = (),
    held: Collection[str] = (),
) -> int:
    """How many job rows are pending or running: work that is not settled. The pending
    rows of ``paused`` jobs wait for a resume, not for a worker, and those of ``held`` jobs
    (a workflow's waits and approvals) for an event or a person until their timeout: they
    are left out."""
    outbox = tables.outbox
    query = select(func.count()).select_from(outbox).where(outbox.c.state.in_((PENDING, RUNNING)))
    if paused:
        query = query.where(or_(outbox.c.state == RUNNING, outbox.c.job_qn.not_in(sorted(paused))))
    if held:
        waiting = and_(
            outbox.c.state == PENDING,
            outbox.c.job_qn.in_(sorted(held)),
            guards.not_due(outbox, clocks.now()),
        )
        query = query.where(not_(waiting))
    return int(conn.execute(query).scalar_one())


def count_paused_rows(conn: Connection, tables: Tables, paused: Collection[str]) -> dict[str, int]:
    """Per job of ``paused``: how many of its rows wait pending."""
    if not paused:
        return {}
    outbox = tables.outbox
    query = (
        select(outbox.c.job_qn, func.count())
        .where(outbox.c.state == PENDING, outbox.c.job_qn.in_(sorted(paused)))
        .group_by(outbox.c.job_qn)
    )
    return {str(qn): int(rows) for qn, rows in conn.execute(query).all()}


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
    row for its backoff is not late) and the relay may take it (``guards.relayable``).
    """
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    query = select(func.min(outbox.c.not_before), func.count()).where(
        guards.relayable(outbox, now), outbox.c.not_before <= now
    )
    oldest, rows = conn.execute(query).one()
    if oldest is None:
        return DueBacklog(int(rows), 0.0)
    if oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=dt.UTC)
    return DueBacklog(int(rows), max(0.0, (now - oldest).total_seconds()))


def count_unclaimed(conn: Connection, tables: Tables, older_than: float) -> int:
    """How many published job rows no worker has claimed ``older_than`` seconds after their
    attempt could start: what ``/health/jobs`` and ``asanoha_outbox_unclaimed_rows`` report.

    A row the broker holds is claimed as soon as a worker is free, so these are messages
    the broker lost (a Redis flushed or restarted without its append-only file, a deleted
    queue), or a backlog the workers are that far behind on; the queue's length tells which
    (shorter than this count: lost). The relay sends lost messages again only after the
    visibility timeout (see ``resend_lost_messages``), so this is what shows a loss before.
    """
    outbox = tables.outbox
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=older_than)
    query = (
        select(func.count())
        .select_from(outbox)
        .where(
            outbox.c.state == PENDING,
            outbox.c.published_at < before,
            outbox.c.not_before < before,
        )
    )
    return int(conn.execute(query).scalar_one())
