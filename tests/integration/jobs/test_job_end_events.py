"""Each end of a job row's attempt appends one event to the row's stream (``asanoha:job``) with
the end, in its transaction: ``retried`` while another attempt follows, then ``succeeded``,
``failed`` or ``cancelled``; the prune of finished rows takes them with the rows."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.platform.jobs.retention import prune_finished
from asanoha.platform.model import Backoff, Feature

DATABASES = ["postgres", "sqlite"]


def _feature() -> Feature:
    ledger = Feature("ledger")

    @ledger.job("close", manual=True, retries=2, backoff=Backoff.fixed(0.01))
    def close(payload: dict[str, Any], ctx: Any) -> str:
        if ctx.attempt <= payload["failures"]:
            raise RuntimeError(f"attempt {ctx.attempt} failed")
        return "closed"

    return ledger


def _events(stack: Any, job_id: Any) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    events = stack.tables.events
    with stack.db.connect() as conn:
        rows = conn.execute(
            select(events.c.type, events.c.version, events.c.payload, events.c.metadata)
            .where(events.c.stream_type == "asanoha:job", events.c.stream_id == str(job_id))
            .order_by(events.c.id)
        ).all()
    return [(row.type, row.version, row.payload, row.metadata) for row in rows]


@pytest.mark.parametrize("database", DATABASES)
def test_a_retried_then_succeeded_job_tells_each_end(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(features=[_feature()], jobs=True, database=database)
    job_id = stack.dispatch_job("ledger:job:close", {"failures": 1})
    stack.drain()
    assert [(kind, version, payload) for kind, version, payload, _ in _events(stack, job_id)] == [
        ("asanoha:job.retried", 1, {"job": "ledger:job:close", "attempt": 1, "status": "retrying"}),
        ("asanoha:job.succeeded", 2, {"job": "ledger:job:close", "attempt": 2, "status": "succeeded"}),
    ]  # fmt: skip


@pytest.mark.parametrize("database", DATABASES)
def test_a_job_failing_for_good_tells_its_failure(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(features=[_feature()], jobs=True, database=database)
    job_id = stack.dispatch_job("ledger:job:close", {"failures": 9})
    with pytest.raises(AssertionError):
        stack.drain()
    kinds = [kind for kind, *_ in _events(stack, job_id)]
    assert kinds == ["asanoha:job.retried", "asanoha:job.retried", "asanoha:job.failed"]


@pytest.mark.parametrize("database", DATABASES)
def test_a_cancelled_pending_job_tells_its_cancel_and_the_prune_takes_it(
    asanoha_stack: Any, database: str
) -> None:
    stack = asanoha_stack(features=[_feature()], jobs=True, database=database)
    job_id = stack.dispatch_job("ledger:job:close", {"failures": 0}, delay=3600)
    stack.app.jobs.cancel(uuid.UUID(str(job_id)))
    [(kind, version, payload, metadata)] = _events(stack, job_id)
    assert (kind, version, payload["status"]) == ("asanoha:job.cancelled", 1, "cancelled")
    assert set(metadata) == {"owner"}
    with stack.db.begin() as conn:
        prune_finished(conn, stack.tables, dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))
    assert _events(stack, job_id) == []
