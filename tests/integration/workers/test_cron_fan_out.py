"""A per-tenant tick whose fan-out failed part-way is completed, once per tenant; ``catch_up``
replays from the newest tick also after the prune deleted its job rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.exc import OperationalError

from asanoha.platform.service import cron_ticks
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME
from asanoha.workers.cron_tasks import enqueue_cron_tick
from asanoha.workers.lanes import queue_name
from tests.integration.workers.conftest import job_rows
from tests.integration.workers.test_cron_tenants_and_boot import TENANTS, tenant_feature

REPORT = "fanout:job:report"
FIRST = "2026-05-04T12:00:00+00:00"
SECOND = "2026-05-04T12:05:00+00:00"


@contextmanager
def database_fails_after(stack: Any, job_rows_placed: int) -> Iterator[None]:
    """The database fails once, at the insert of the job row after the first
    ``job_rows_placed`` (the connection dropped mid-fan-out)."""
    engine = stack.service.database.engine
    placed = 0

    def fail(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        nonlocal placed
        if statement.lstrip().upper().startswith("INSERT INTO ASANOHA_OUTBOX"):
            placed += 1
            if placed == job_rows_placed + 1:
                dropped = ConnectionError("server closed the connection")
                raise OperationalError(statement, {}, dropped)

    event.listen(engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail)


def tick_keys(stack: Any) -> list[str]:
    return sorted(row.idempotency_key for row in job_rows(stack, REPORT))


def keys_of(*ticks: str) -> list[str]:
    return sorted(f"{REPORT}@cron:{tick}@{tenant}" for tick in ticks for tenant in TENANTS)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_fan_out_that_failed_part_way_is_completed_by_the_next_tick_once_per_tenant(
    asanoha_stack, database
):
    stack = asanoha_stack(features=[tenant_feature([])], database=database, tenants=lambda: TENANTS)
    app = stack.app

    def tick(at: str) -> list[Any]:
        return enqueue_cron_tick(app.service, app.settings, REPORT, at, tenants=app.tenants)

    with database_fails_after(stack, 1), pytest.raises(OperationalError):
        tick(FIRST)
    # The next tick fans out the failed one too; sent again (a retry, a second beat), neither
    # places a row twice.
    assert len(tick(SECOND)) == len(TENANTS)
    assert tick_keys(stack) == keys_of(FIRST, SECOND)
    assert len(tick(FIRST)) == len(TENANTS)
    assert len(tick(SECOND)) == len(TENANTS)
    assert tick_keys(stack) == keys_of(FIRST, SECOND)


def test_the_tick_tasks_retry_completes_a_failed_fan_out(asanoha_stack):
    seen: list[Any] = []
    stack = asanoha_stack(features=[tenant_feature(seen)], jobs=True, tenants=lambda: TENANTS)
    queue = queue_name(stack.app.settings.queue_prefix, "cron")
    with database_fails_after(stack, 2):
        stack.app.celery.send_task(CRON_TASK_NAME, args=[REPORT, FIRST], queue=queue)
        # The failed delivery, then its retry (held by the broker for up to a second).
        stack.drain()
    assert tick_keys(stack) == keys_of(FIRST)
    assert sorted(seen) == sorted(TENANTS)


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_catch_up_replays_from_the_newest_tick_after_the_prune_deleted_its_rows(
    asanoha_stack, database
):
    seen: list[Any] = []
    stack = asanoha_stack(
        features=[tenant_feature(seen)],
        jobs=True,
        database=database,
        settings={"job_retention_days": 1},
        tenants=lambda: TENANTS,
    )
    app = stack.app
    digest = "fanout:job:digest"
    noon = dt.datetime(2026, 5, 4, 12, 0, tzinfo=dt.UTC)
    for hour in (11, 12):
        at = noon.replace(hour=hour)
        sent = at + dt.timedelta(seconds=2)
        enqueue_cron_tick(app.service, app.settings, digest, at.isoformat(), sent=sent.isoformat())
    stack.drain()
    assert seen == ["digest", "digest"]
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    with stack.db.begin() as conn:
        conn.execute(update(stack.tables.outbox).values(finished_at=long_ago))
        conn.execute(update(stack.tables.cron_ticks).values(done_at=long_ago))
    stack.app.celery.send_task(
        PRUNE_TASK_NAME, queue=queue_name(app.settings.queue_prefix, "worker")
    )
    stack.drain()
    assert job_rows(stack, digest) == []
    with stack.db.connect() as conn:
        kept = conn.execute(select(stack.tables.cron_ticks.c.tick)).scalars().all()
    assert kept == [noon.isoformat()]
    # Beat was down from 12:30 to 15:30: the late 15:00 tick replays 13:00, 14:00 and 15:00.
    late = noon.replace(hour=15)
    sent = late + dt.timedelta(minutes=30)
    replayed = enqueue_cron_tick(
        app.service, app.settings, digest, late.isoformat(), sent=sent.isoformat()
    )
    assert len(replayed) == 3
    keys = sorted(row.idempotency_key for row in job_rows(stack, digest))
    assert keys == [f"{digest}@cron:2026-05-04T{h}:00:00+00:00" for h in (13, 14, 15)]


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_the_prune_keeps_a_tick_whose_fan_out_is_still_to_complete(asanoha_stack, database):
    stack = asanoha_stack(features=[tenant_feature([])], database=database, tenants=lambda: TENANTS)
    app = stack.app
    with database_fails_after(stack, 0), pytest.raises(OperationalError):
        enqueue_cron_tick(app.service, app.settings, REPORT, FIRST, tenants=app.tenants)
    enqueue_cron_tick(app.service, app.settings, "fanout:job:plain", FIRST)
    enqueue_cron_tick(app.service, app.settings, "fanout:job:plain", SECOND)
    ticks = stack.tables.cron_ticks
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    with stack.db.begin() as conn:
        conn.execute(update(ticks).values(opened_at=long_ago))
        conn.execute(update(ticks).where(ticks.c.done_at.is_not(None)).values(done_at=long_ago))
        assert cron_ticks.prune_ticks(conn, stack.tables, long_ago + dt.timedelta(days=1)) == 1
        kept = conn.execute(select(ticks.c.job_qn, ticks.c.tick, ticks.c.done_at)).all()
    # The open tick of the failed fan-out, and the newest tick of the other job.
    assert sorted((qn, tick, done is None) for qn, tick, done in kept) == [
        ("fanout:job:plain", SECOND, False),
        (REPORT, FIRST, True),
    ]
    assert (
        len(enqueue_cron_tick(app.service, app.settings, REPORT, SECOND, tenants=app.tenants)) == 3
    )
    assert tick_keys(stack) == keys_of(FIRST, SECOND)
