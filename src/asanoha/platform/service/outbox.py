"""The transactional outbox: a job is a row written with the write, published after commit.

The row is the job's record (payload, headers, state, attempt); what reaches the broker is a
pointer to it: the row id as the task id and the number of the attempt to run.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from asanoha.platform.personal.vault import seal_known
from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.outbox")

#: Seconds a fresh row is left to its writer (which publishes it right after commit) before
#: the relay may take it: a younger row is most likely being published right now.
RELAY_GRACE = 5.0
#: Job row states. ``pending``: waiting for its next attempt; ``running``: an attempt is
#: claimed; ``succeeded`` / ``failed`` / ``cancelled``: finished for good.
PENDING, RUNNING, SUCCEEDED, FAILED = "pending", "running", "succeeded", "failed"
CANCELLED = "cancelled"
FINISHED_STATES = (SUCCEEDED, FAILED, CANCELLED)


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
    #: Seconds the broker holds the message before delivering it; for a new row, also
    #: the seconds its first attempt waits (``not_before``).
    countdown: float = 0.0
    #: Whether the writer publishes the new row after commit (with its countdown); else the
    #: row waits in the database and the relay publishes it when it is due: a delay longer
    #: than the broker may hold.
    by_broker: bool = True
    #: 0..9, higher delivered first (``None``: no priority).
    priority: int | None = None
    #: The claim token the row carries while it waits for this message (``None`` for a row
    #: never claimed): its publish is marked only on a row still carrying it.
    row_token: str | None = None
    #: The row's concurrency key and per-tenant slot key (see ``job_concurrency``).
    concurrency_key: str | None = None
    slot_key: str | None = None


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


def relay_time(not_before: dt.datetime, *, by_broker: bool) -> dt.datetime:
    """When the relay may publish a pending attempt that may start at ``not_before``.

    The rule of the relay clock, which every writer of ``relay_after`` follows:
    ``relay_after >= not_before``. The relay never sends an attempt before its time, so a
    wait longer than the broker may hold stays in the database, and a debounce window stays
    open (the enqueues of the key collapse into a row only while nobody published it).
    ``by_broker``: the writer publishes the attempt itself, with its countdown, right after
    commit; the relay leaves it ``RELAY_GRACE`` more seconds to do so.
    """
    return not_before + dt.timedelta(seconds=RELAY_GRACE) if by_broker else not_before


def relay_time_now(outbox: Table, now: dt.datetime) -> ColumnElement[dt.datetime]:
    """``relay_time`` of a pending row made due for the relay at ``now`` (no writer
    publishes it), as a SQL expression: ``now``, or its ``not_before`` while that is
    later."""
    at_now = literal(now, outbox.c.not_before.type)
    return case((outbox.c.not_before > at_now, outbox.c.not_before), else_=at_now)


class OutboxPublisher(Protocol):
    """Sends an outbox message to the broker. Raising leaves the row for the relay."""

    def publish(self, message: OutboxMessage) -> None:
        """Send ``message``; raise when the broker did not take it."""


def write_outbox(conn: Connection, tables: Tables, messages: Sequence[OutboxMessage]) -> None:
    """Insert ``messages`` as pending job rows in the caller's transaction."""
    if not messages:
        return
    now = dt.datetime.now(dt.UTC)
    rows = []
    for message in messages:
        not_before = now + dt.timedelta(seconds=message.countdown)
        rows.append(
            {
                "id": message.id,
                "job_qn": message.job_qn,
                # A personal value the transaction wrote or read is stored as its ciphertext.
                "payload": seal_known(conn, message.payload),
                "headers": message.headers,
                "trigger_result": seal_known(conn, message.trigger_result),
                "state": PENDING,
                "attempt": 0,
                "not_before": not_before,
                # Its writer publishes it right after commit; held in the row, the relay
                # publishes it once it is due.
                "relay_after": relay_time(not_before, by_broker=message.by_broker),
                "created_at": now,
                "publish_attempts": 0,
                "idempotency_key": message.idempotency_key,
                "priority": message.priority,
                "concurrency_key": message.concurrency_key,
                "slot_key": message.slot_key,
            }
        )
    conn.execute(insert(tables.outbox), rows)


def cancel_job_row(conn: Connection, tables: Tables, job_id: uuid.UUID, state: str) -> str:
    """Cancel the job row ``job_id``, found in ``state`` (the caller holds it locked);
    return its state afterwards.

    A pending row is ``cancelled`` at once: no attempt of it runs, and a message delivered
    later is acknowledged unrun (the claim takes pending rows only). A running row is
    marked ``cancel_requested``: the attempt sees it (``ctx.cancel_requested``,
    ``ctx.checkpoint()``), and if it ends wanting another attempt (a retry, a snooze) the
    row is cancelled instead (see ``JobRows``). A finished row is left as it is.
    """
    outbox = tables.outbox
    if state == PENDING:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == job_id, outbox.c.state == PENDING)
            .values(state=CANCELLED, finished_at=func.now(), claim_token=None)
        )
        return CANCELLED
    if state == RUNNING:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == job_id, outbox.c.state == RUNNING)
            .values(cancel_requested=True)
        )
    return state


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

    Only a row still waiting for exactly that attempt, with the claim token it had when
    the message was made, is marked: a worker may have claimed and even ended the attempt
    before the publisher got here, and the mark must not land on the next attempt, nor on
    the same attempt snoozed (which a mark of "published" would leave waiting for a
    message nobody sends).
    """
    if not sent and not failed:
        return
    outbox = tables.outbox
    with database.begin() as conn:
        for messages, values in (
            (sent, {"published_at": func.now()}),
            (failed, {"relay_after": relay_time_now(outbox, dt.datetime.now(dt.UTC))}),
        ):
            groups = sorted({(message.attempt, message.row_token or "") for message in messages})
            for attempt, token in groups:
                ids = [
                    message.id
                    for message in messages
                    if (message.attempt, message.row_token or "") == (attempt, token)
                ]
                conn.execute(
                    update(outbox)
                    .where(
                        outbox.c.id.in_(ids),
                        outbox.c.state == PENDING,
                        outbox.c.attempt == attempt - 1,
                        func.coalesce(outbox.c.claim_token, "") == token,
                    )
                    .values(publish_attempts=outbox.c.publish_attempts + 1, **values)
                )


def relay_outbox(
    database: Database,
    tables: Tables,
    publisher: OutboxPublisher,
    *,
    limit: int,
    paused: Collection[str] = (),
) -> int:
    """Publish pending job rows nobody published and that are due; return how many were sent.
    Rows of the ``paused`` jobs are left alone (see ``job_pauses``).

    Due: a publish failed, the writer did not publish within ``RELAY_GRACE``, or a retry held
    in the database reached its time. (A published row whose message the broker lost is
    ``resend_lost_messages``'s.) Rows are locked, skipping locked ones, so the relays of a
    worker fleet share the work instead of sending a row twice.
    """
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    query = (
        select(
            outbox.c.id, outbox.c.job_qn, outbox.c.attempt, outbox.c.not_before, outbox.c.priority
        )
        .where(
            outbox.c.state == PENDING,
            outbox.c.published_at.is_(None),
            outbox.c.relay_after <= now,
        )
        # Higher priorities first, then the longest waiting (sorts the due rows: a backlog
        # of due rows costs a sort per pass).
        .order_by(func.coalesce(outbox.c.priority, 0).desc(), outbox.c.relay_after)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    with database.begin() as conn:
        if paused:
            query = query.where(outbox.c.job_qn.not_in(sorted(paused)))
        rows = conn.execute(query).all()
        if not rows:
            return 0
        messages = [
            OutboxMessage(
                id=uuid.UUID(str(row.id)),
                job_qn=row.job_qn,
                attempt=row.attempt + 1,
                countdown=max(0.0, (row.not_before - now).total_seconds()),
                priority=row.priority,
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


#: Seconds between the time a row records as its publish and the broker holding the message
#: (the relay marks a batch with the start of the transaction that publishes it): rows
#: published more recently are left out of the count a queue's depth is compared with.
PUBLISH_SETTLE = 5.0
#: Seconds a row must be found missing from its queue, on every relay pass, before it is sent
#: again: a message a worker took from the queue and has not claimed yet is missing for a
#: moment (longer while the database is slow).
CONFIRM_LOST = 3.0

#: job qn -> the queue its messages go to.
QueueOf = Callable[[str], str]
#: The messages each of the given queues holds, as the broker counts them.
QueueDepths = Callable[[Sequence[str]], Mapping[str, int]]


@dataclass(frozen=True)
class LostMessages:
    """One pass of ``resend_lost_messages``."""

    #: Rows sent again.
    sent: int
    #: Rows found missing and not sent yet, with when they were first found missing: the
    #: next pass's ``suspected``.
    suspected: Mapping[uuid.UUID, dt.datetime]


def requeue_unclaimed(conn: Connection, tables: Tables) -> int:
    """Make every published, unclaimed job row due for the relay at once; return how many.

    For a process that starts the only broker its jobs reach (the in-process ``memory://``):
    the messages an earlier process published there went with it, so their rows are known
    lost and need not wait the visibility timeout that ``resend_lost_messages`` waits.
    """
    outbox = tables.outbox
    result = conn.execute(
        update(outbox)
        .where(outbox.c.state == PENDING, outbox.c.published_at.is_not(None))
        .values(published_at=None, relay_after=relay_time_now(outbox, dt.datetime.now(dt.UTC)))
    )
    return int(result.rowcount or 0)


def resend_lost_messages(
    database: Database,
    tables: Tables,
    publisher: OutboxPublisher,
    *,
    lost_after: float,
    queue_of: QueueOf,
    queue_depths: QueueDepths,
    suspected: Mapping[uuid.UUID, dt.datetime] | None = None,
    confirm_after: float = CONFIRM_LOST,
    limit: int,
) -> LostMessages:
    """Publish again the pending rows whose message the broker lost (a Redis flushed or
    restarted without its append-only file, a deleted queue).

    Age alone does not tell a lost message: in a backlog longer than ``lost_after`` (the
    visibility timeout) a row waits unclaimed that long with its message still queued, and
    a copy of every such row would inflate the queue length the fleet scales on and put a
    crashed job's retry behind copies that are acknowledged unrun. So a queue is missing
    messages when it holds fewer than there are published, unclaimed rows routed to it; and
    as many rows as are missing are sent again, the oldest published first: the queue is
    consumed in order, so a row older than the messages still queued has lost its own.

    Only rows published more than ``lost_after`` ago may be sent again, and a copy is a new
    publish, so a row is sent again at most once per ``lost_after``. A message a worker took
    from the queue and has not claimed yet is missing from the depth for a moment; a row is
    sent only when every pass finds it missing for ``confirm_after`` seconds (``suspected``
    carries what the earlier passes found). The candidates are locked without skipping, so
    the relays of a fleet take turns: the second counts after the first committed its copies.
    """
    outbox = tables.outbox
    now = dt.datetime.now(dt.UTC)
    old = now - dt.timedelta(seconds=max(lost_after, PUBLISH_SETTLE))
    candidates = (
        select(outbox.c.id, outbox.c.job_qn, outbox.c.attempt, outbox.c.priority)
        .where(outbox.c.state == PENDING, outbox.c.published_at < old, outbox.c.not_before < old)
        .order_by(outbox.c.published_at, outbox.c.id)
        .limit(limit)
        .with_for_update()
    )
    with database.begin() as conn:
        rows = conn.execute(candidates).all()
        if not rows:
            return LostMessages(0, {})
        by_queue: dict[str, list[Any]] = {}
        for row in rows:
            by_queue.setdefault(queue_of(row.job_qn), []).append(row)
        # The depths before the rows: a message taken from the queue after the depth was
        # read is counted there and, claimed or not, is no row the count below misses.
        depths = queue_depths(sorted(by_queue))
        missing = _missing_messages(conn, tables, queue_of, depths, now)
        found = [
            uuid.UUID(str(row.id))
            for queue, queued in by_queue.items()
            for row in queued[: max(0, missing.get(queue, 0))]
        ]
        since = {row_id: (suspected or {}).get(row_id, now) for row_id in found}
        again = {
            row_id
            for row_id, first in since.items()
            if (now - first).total_seconds() >= confirm_after
        }
        messages = [
            OutboxMessage(
                id=uuid.UUID(str(row.id)),
                job_qn=row.job_qn,
                attempt=row.attempt + 1,
                priority=row.priority,
            )
            for row in rows
            if uuid.UUID(str(row.id)) in again
        ]
        sent, failed = _publish_each(publisher, messages)
        for done, values in ((sent, {"published_at": func.now()}), (failed, {})):
            if done:
                conn.execute(
                    update(outbox)
                    .where(outbox.c.id.in_([message.id for message in done]))
                    .values(publish_attempts=outbox.c.publish_attempts + 1, **values)
                )
    if sent:
        log.warning(
            "sent %d job message(s) again: their queue had lost them (%s)",
            len(sent),
            ", ".join(f"{queue} holds {depth}" for queue, depth in depths.items()),
        )
    return LostMessages(
        len(sent), {row_id: first for row_id, first in since.items() if row_id not in again}
    )


def _missing_messages(
    conn: Connection,
    tables: Tables,
    queue_of: QueueOf,
    depths: Mapping[str, int],
    now: dt.datetime,
) -> dict[str, int]:
    """Per queue: published, unclaimed rows routed to it, less the messages it holds.

    Rows published in the last ``PUBLISH_SETTLE`` seconds, and rows whose countdown ended
    since then, are left out: their messages may be on their way, or held by a worker
    until their time. What the count leaves out only makes the difference smaller.
    """
    outbox = tables.outbox
    settled = now - dt.timedelta(seconds=PUBLISH_SETTLE)
    query = (
        select(outbox.c.job_qn, func.count())
        .where(
            outbox.c.state == PENDING,
            outbox.c.published_at < settled,
            outbox.c.not_before < settled,
        )
        .group_by(outbox.c.job_qn)
    )
    expected = dict.fromkeys(depths, 0)
    for job_qn, rows in conn.execute(query).all():
        queue = queue_of(job_qn)
        if queue in expected:
            expected[queue] += int(rows)
    return {queue: expected[queue] - depth for queue, depth in depths.items()}


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


def count_unfinished(conn: Connection, tables: Tables, paused: Collection[str] = ()) -> int:
    """How many job rows are pending or running: work that is not settled. The pending
    rows of ``paused`` jobs wait for a resume, not for a worker: they are left out."""
    outbox = tables.outbox
    query = select(func.count()).select_from(outbox).where(outbox.c.state.in_((PENDING, RUNNING)))
    if paused:
        query = query.where(or_(outbox.c.state == RUNNING, outbox.c.job_qn.not_in(sorted(paused))))
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


#: What a boot job's idempotency key holds after its job's QN: ``<job qn>@boot:<release>``.
BOOT_KEY_MARK = "@boot:"


def boot_key(job_qn: str, release: str) -> str:
    """The idempotency key of a boot job's row: one per (job, release)."""
    return f"{job_qn}{BOOT_KEY_MARK}{release}"


def prune_finished(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """Delete finished job rows, and run rows, that ended before ``before``; return the
    number of job rows deleted.

    A boot job's row is kept whatever its age: it is the only record that its release ran
    the job, and the next worker of that release to start would run it again without it.
    """
    outbox, runs = tables.outbox, tables.job_runs
    # A QN holds no LIKE wildcard (``%``, ``_``): the key's prefix is matched exactly.
    is_boot_record = outbox.c.idempotency_key.startswith(outbox.c.job_qn + BOOT_KEY_MARK)
    deleted = conn.execute(
        delete(outbox).where(
            outbox.c.state.in_(FINISHED_STATES),
            outbox.c.finished_at < before,
            or_(outbox.c.idempotency_key.is_(None), ~is_boot_record),
        )
    ).rowcount
    conn.execute(delete(runs).where(runs.c.finished_at < before))
    return int(deleted or 0)
