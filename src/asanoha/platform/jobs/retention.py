"""Retention of job rows: what the prune deletes and what it keeps (the records rules read)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, and_, delete, or_, select

from asanoha.platform.jobs.job_events import JOB_STREAM_TYPE
from asanoha.platform.jobs.states import FINISHED_STATES
from asanoha.platform.jobs.workflow_events import WORKFLOW_STREAM_TYPE
from asanoha.platform.store import Tables

#: What a boot job's idempotency key holds after its job's QN: ``<job qn>@boot:<release>``.
BOOT_KEY_MARK = "@boot:"


def boot_key(job_qn: str, release: str) -> str:
    """The idempotency key of a boot job's row: one per (job, release)."""
    return f"{job_qn}{BOOT_KEY_MARK}{release}"


def prune_finished(conn: Connection, tables: Tables, before: dt.datetime) -> int:
    """Delete finished job rows (and their kept results), run rows and job events that ended
    or were written before ``before``; return the number of job rows deleted.

    A boot job's row is kept whatever its age: it is the only record that its release ran
    the job, and the next worker of that release to start would run it again without it.
    """
    outbox, runs = tables.outbox, tables.job_runs
    # A QN holds no LIKE wildcard (``%``, ``_``): the key's prefix is matched exactly.
    is_boot_record = outbox.c.idempotency_key.startswith(outbox.c.job_qn + BOOT_KEY_MARK)
    pruned = and_(
        outbox.c.state.in_(FINISHED_STATES),
        outbox.c.finished_at < before,
        or_(outbox.c.idempotency_key.is_(None), ~is_boot_record),
    )
    results = tables.job_results
    conn.execute(delete(results).where(results.c.job_id.in_(select(outbox.c.id).where(pruned))))
    deleted = conn.execute(delete(outbox).where(pruned)).rowcount
    conn.execute(delete(runs).where(runs.c.finished_at < before))
    # A job's events (its progress, its row's ends) and a run's go with the rows they tell of.
    events = tables.events
    conn.execute(
        delete(events).where(
            events.c.stream_type.in_((JOB_STREAM_TYPE, WORKFLOW_STREAM_TYPE)),
            events.c.created_at < before,
        )
    )
    return int(deleted or 0)
