"""Operator transitions of a job row: cancel, retry a failed row, resume a paused job's rows,
end a held workflow step's row."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, Update, bindparam, select, update

from asanoha.platform.jobs import clocks, guards, job_events
from asanoha.platform.jobs.clocks import relay_time, relay_time_now
from asanoha.platform.jobs.publishing import published_by_waker
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.store import Tables


def cancel_job_row(conn: Connection, tables: Tables, job_id: uuid.UUID, state: str) -> str:
    """Cancel the job row ``job_id``, found in ``state`` (the caller holds it locked);
    return its state afterwards.

    A pending row is ``cancelled`` at once: no attempt of it runs, and a message delivered
    later is acknowledged unrun (the claim takes pending rows only). A running row is
    marked ``cancel_requested``: the attempt sees it (``ctx.cancel_requested``,
    ``ctx.checkpoint()``), and if it ends wanting another attempt (a retry, a snooze) the
    row is cancelled instead (see ``attempts.JobRows``). A finished row is left as it is.
    """
    outbox = tables.outbox
    if state == PENDING:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == job_id, outbox.c.state == PENDING)
            .values(state=CANCELLED, finished_at=clocks.now(), claim_token=None)
        )
        job_events.append_end_event(conn, tables, job_id, CANCELLED)
        wake_next_of_keys(conn, tables, job_id)
        return CANCELLED
    if state == RUNNING:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == job_id, outbox.c.state == RUNNING)
            .values(cancel_requested=True)
        )
    return state


def finish_held_row(conn: Connection, tables: Tables, job_id: uuid.UUID) -> bool:
    """End the pending row ``job_id`` of a held workflow step (a wait, an approval) as
    succeeded without running it: what it waited for came. Returns whether it was pending
    (a row whose timeout's attempt runs, or that ended, is left to that)."""
    outbox = tables.outbox
    # A row its timeout's attempt holds (claimed, or ending and waiting for the run's row
    # this caller may hold) is skipped: that attempt decides the step.
    free = (
        select(outbox.c.id)
        .where(outbox.c.id == job_id, outbox.c.state == PENDING)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    ended = conn.execute(
        update(outbox)
        .where(outbox.c.id == free, outbox.c.state == PENDING)
        .values(state=SUCCEEDED, finished_at=clocks.now(), claim_token=None)
    ).rowcount
    if ended:
        job_events.append_end_event(conn, tables, job_id, SUCCEEDED)
    return bool(ended)


def wake_next_of_keys(conn: Connection, tables: Tables, job_id: uuid.UUID) -> int:
    """Make the oldest row waiting for each key of the row ``job_id`` due for the relay:
    that row, pending, may have been what its key's next row waited for, and no end of it
    will wake them now. Returns how many were woken (a woken row whose key is still busy
    waits again)."""
    outbox = tables.outbox
    relay_after = relay_time_now(outbox, clocks.now())
    return sum(
        len(conn.execute(wake_of_key(outbox, column, relay_after), {"row_id": job_id}).all())
        for column in KEY_COLUMNS
    )


#: The columns of a job row's keys: its ``sequential`` key, its ``max_per_tenant`` slot.
KEY_COLUMNS = ("concurrency_key", "slot_key")


def wake_of_key(outbox: Table, column: str, relay_after: Any, published_at: Any = None) -> Update:
    """The wake of the oldest row waiting for the key in ``column`` of the row ``:row_id``:
    no longer waiting, due for the relay at ``relay_after`` (or, with ``published_at``,
    published then by the waker: ``publishing.published_by_waker``); returns its id, job,
    attempt and priority (no row: nothing waits, or the row holds no such key). A row
    another wake holds is skipped: that wake takes it."""
    own = outbox.alias("own")
    waiting = outbox.alias("waiting")
    key = select(own.c[column]).where(own.c.id == bindparam("row_id")).scalar_subquery()
    oldest = (
        select(waiting.c.id)
        .where(waiting.c[column] == key, guards.waiting(waiting))
        .order_by(waiting.c.created_at, waiting.c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    published = {} if published_at is None else published_by_waker(outbox, published_at)
    return (
        update(outbox)
        .where(outbox.c.id == oldest, guards.waiting(outbox))
        .values(relay_after=relay_after, claim_token=None, **published)
        .returning(outbox.c.id, outbox.c.job_qn, outbox.c.attempt, outbox.c.priority)
    )


def cancel_key(conn: Connection, tables: Tables, key: str) -> None:
    """``replace``: cancel the pending rows of the concurrency key ``key`` (they never run)
    and ask its running attempts to stop."""
    outbox = tables.outbox
    replaced = conn.execute(
        update(outbox)
        .where(outbox.c.concurrency_key == key, outbox.c.state == PENDING)
        .values(state=CANCELLED, finished_at=clocks.now(), claim_token=None)
        .returning(outbox.c.id)
    ).scalars()
    for job_id in list(replaced):
        job_events.append_end_event(conn, tables, uuid.UUID(str(job_id)), CANCELLED)
    conn.execute(
        update(outbox)
        .where(outbox.c.concurrency_key == key, outbox.c.state == RUNNING)
        .values(cancel_requested=True)
    )


def retry_failed_row(
    conn: Connection,
    tables: Tables,
    job_id: uuid.UUID,
    *,
    by_broker: bool,
    at: dt.datetime,
    states: Sequence[str] = (FAILED,),
) -> bool:
    """Put the row ``job_id``, failed for good, back to pending at attempt 0 (every retry
    its job declares again), due at ``at``; return whether it was failed. ``by_broker``:
    the caller publishes it after commit (the relay leaves it ``RELAY_GRACE``). ``states``:
    a workflow run's retry also takes the step rows its failure cancelled."""
    outbox = tables.outbox
    result = conn.execute(
        update(outbox)
        .where(outbox.c.id == job_id, outbox.c.state.in_(list(states)))
        .values(
            state=PENDING,
            attempt=0,
            not_before=at,
            relay_after=relay_time(at, by_broker=by_broker),
            published_at=None,
            started_at=None,
            finished_at=None,
            # The next claim is a new delivery's; nothing of the failed attempt's carries over.
            claim_token=None,
            cancel_requested=False,
        )
    )
    return bool(result.rowcount)


def resume_rows(conn: Connection, tables: Tables, job_qns: Sequence[str], at: dt.datetime) -> int:
    """Make the pending, unpublished rows of ``job_qns`` (just resumed) due for the relay:
    at ``at``, or at their ``not_before`` for those whose time has not come (a debounce
    window, a long delay, a retry's backoff). Returns how many."""
    if not job_qns:
        return 0
    outbox = tables.outbox
    woken = conn.execute(
        update(outbox)
        .where(
            outbox.c.job_qn.in_(job_qns),
            outbox.c.state == PENDING,
            guards.unpublished(outbox),
        )
        .values(relay_after=relay_time_now(outbox, at))
    ).rowcount
    return int(woken or 0)


def bring_forward(conn: Connection, tables: Tables, seconds: float) -> int:
    """Move the clocks of the pending rows whose time has not come ``seconds`` nearer, as if
    that much time had passed (a test's ``stack.advance_clock``): a ``delay=``, a sleep
    step, a retry's backoff, a snooze, a debounce window. Their messages are sent again (a
    copy sent earlier with its countdown arrives later and finds its attempt done). A row
    waiting for its key or for a resume is left to what wakes it. Returns how many."""
    outbox = tables.outbox
    shift = dt.timedelta(seconds=seconds)
    # Row by row, in Python: the two databases keep times in types whose SQL arithmetic
    # differs, and a test moves few rows.
    ahead = conn.execute(
        select(outbox.c.id, outbox.c.not_before).where(
            outbox.c.state == PENDING,
            guards.not_due(outbox, clocks.now()),
            guards.not_waiting(outbox),
        )
    ).all()
    for row in ahead:
        moved = clocks.as_utc(row.not_before) - shift
        conn.execute(
            update(outbox)
            .where(outbox.c.id == row.id, outbox.c.state == PENDING)
            # Unpublished again: the relay sends it at its new time (the clock's own rule).
            .values(
                not_before=moved,
                relay_after=relay_time(moved, by_broker=False),
                published_at=None,
            )
        )
    return len(ahead)
