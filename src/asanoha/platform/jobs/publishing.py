"""Publishing job rows: marking a row's message sent, the relay, and sending lost messages
again. The only writers of ``published_at``.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, Update, bindparam, func, null, select, update

from asanoha.platform.jobs import clocks, guards
from asanoha.platform.jobs.clocks import relay_time_now
from asanoha.platform.jobs.message import OutboxMessage, OutboxPublisher, publish_each
from asanoha.platform.jobs.states import PENDING
from asanoha.platform.store import Database, Tables

log = logging.getLogger("asanoha.outbox")


def mark_published(
    database: Database,
    tables: Tables,
    sent: Sequence[OutboxMessage],
    failed: Sequence[OutboxMessage],
) -> None:
    """Record the outcome of publishing each message's attempt on its row (``publish_marks``:
    sent, published now; failed, due for the relay now)."""
    if not sent and not failed:
        return
    marks = publish_marks(tables.outbox)
    at = clocks.now()
    with database.begin() as conn:
        for mark, messages in zip(marks, (sent, failed), strict=True):
            if messages:
                conn.execute(mark, [mark_values(message, at) for message in messages])


def publish_marks(outbox: Table) -> tuple[Update, Update]:
    """The marks of one message's publish, (sent, failed), for ``mark_values``.

    Only a row still waiting for exactly that attempt, with the claim token it had when
    the message was made, is marked: a worker may have claimed and even ended the attempt
    before the publisher got here, and the mark must not land on the next attempt, nor on
    the same attempt snoozed (which a mark of "published" would leave waiting for a
    message nobody sends). A sent message's row is published at ``:mark_at``; a failed
    one's is due for the relay then (no earlier than its ``not_before``), and no longer
    published (its waker marked it published ahead: ``published_by_waker``).
    """
    at = bindparam("mark_at", type_=outbox.c.published_at.type)
    held = update(outbox).where(
        outbox.c.id == bindparam("mark_id"),
        guards.pending_at(outbox, bindparam("mark_row_attempt")),
        guards.held_by(outbox, bindparam("mark_token")),
    )
    tried = outbox.c.publish_attempts + 1
    return (
        held.values(publish_attempts=tried, published_at=at),
        held.values(
            # NULL written into the statement: not a parameter each call must give.
            publish_attempts=tried,
            relay_after=relay_time_now(outbox, at),
            published_at=null(),
        ),
    )


def published_by_waker(outbox: Table, at: Any) -> dict[str, Any]:
    """The values that mark a woken row published at ``at`` in its wake's own statement
    (``control.wake_of_key``): the waker publishes the row's message right after its commit,
    and this spares the round trip of marking it after. A publish that fails is marked
    failed (``publish_marks``), which makes the row due for the relay again; a waker that
    dies in between leaves a row published with no message, which the relay sends again
    once it is ``lost_after`` old, as any lost message."""
    return {"published_at": at, "publish_attempts": outbox.c.publish_attempts + 1}


def mark_values(message: OutboxMessage, at: dt.datetime) -> dict[str, Any]:
    """The values of ``publish_marks``'s statements for ``message``, marked at ``at``."""
    return {
        "mark_id": message.id,
        "mark_row_attempt": message.attempt - 1,
        "mark_token": message.row_token or "",
        "mark_at": at,
    }


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
    now = clocks.now()
    query = (
        select(
            outbox.c.id, outbox.c.job_qn, outbox.c.attempt, outbox.c.not_before, outbox.c.priority
        )
        .where(guards.relayable(outbox, now))
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
        sent, failed = publish_each(publisher, messages)
        if sent:
            conn.execute(
                update(outbox)
                .where(outbox.c.id.in_([message.id for message in sent]))
                .values(published_at=clocks.now(), publish_attempts=outbox.c.publish_attempts + 1)
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
        .values(published_at=None, relay_after=relay_time_now(outbox, clocks.now()))
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
    now = clocks.now()
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
        sent, failed = publish_each(publisher, messages)
        for done, values in ((sent, {"published_at": clocks.now()}), (failed, {})):
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
