"""What beat sends: a cron tick enqueues its job through the outbox; the prune deletes
finished job rows older than the retention."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import update

from asanoha.platform.model import Feature
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME
from asanoha.workers.lanes import queue_name
from tests.integration.workers.conftest import job_rows, job_runs


def _feature(seen: list[Any]) -> Feature:
    feature = Feature("clock")

    @feature.job("tick", cron="*/5 * * * *")
    def tick(payload: dict[str, Any], ctx: Any) -> None:
        seen.append((ctx.trigger.name, ctx.tenant_id, ctx.triggered_by))

    return feature


def _send(stack: Any, task: str, *args: Any) -> None:
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    stack.app.celery.send_task(task, args=list(args), queue=queue)


def test_a_cron_tick_enqueues_its_job_as_a_job_row(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    _send(stack, CRON_TASK_NAME, "clock:job:tick")
    stack.drain()
    assert seen == [("cron", "default", "system")]
    (row,) = job_rows(stack)
    assert (row.job_qn, row.state) == ("clock:job:tick", "succeeded")


def test_the_prune_deletes_finished_rows_older_than_the_retention(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)], job_retention_days=1)
    for _ in range(2):
        _send(stack, CRON_TASK_NAME, "clock:job:tick")
        stack.drain()
    old, recent = job_rows(stack)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    with stack.db.begin() as conn:
        outbox, runs = stack.tables.outbox, stack.tables.job_runs
        conn.execute(update(outbox).where(outbox.c.id == old.id).values(finished_at=long_ago))
        conn.execute(update(runs).where(runs.c.task_id == str(old.id)).values(finished_at=long_ago))
    _send(stack, PRUNE_TASK_NAME)
    stack.drain()
    assert [row.id for row in job_rows(stack)] == [recent.id]
    assert [run.task_id for run in job_runs(stack)] == [str(recent.id)]


def test_each_tick_runs_once_however_many_beats_send_it(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    # Two beats send each tick: both messages arrive, one job row per (job, tick) runs.
    for _ in range(2):
        _send(stack, CRON_TASK_NAME, "clock:job:tick", "2026-05-04T12:00:00+00:00")
        _send(stack, CRON_TASK_NAME, "clock:job:tick", "2026-05-04T12:05:00+00:00")
    stack.drain()
    assert len(seen) == 2
    rows = job_rows(stack)
    assert sorted(row.idempotency_key for row in rows) == [
        "clock:job:tick@cron:2026-05-04T12:00:00+00:00",
        "clock:job:tick@cron:2026-05-04T12:05:00+00:00",
    ]
    assert [row.state for row in rows] == ["succeeded", "succeeded"]


def test_two_enqueues_of_one_tick_at_the_same_moment_make_one_row(asanoha_stack):
    from concurrent.futures import ThreadPoolExecutor

    from asanoha.workers.cron_tasks import enqueue_cron_tick

    stack = asanoha_stack(features=[_feature([])])
    app = stack.app
    tick = "2026-05-04T12:00:00+00:00"
    with ThreadPoolExecutor(4) as pool:
        ids = list(
            pool.map(
                lambda _: enqueue_cron_tick(app.service, app.settings, "clock:job:tick", tick)[0],
                range(4),
            )
        )
    assert len(set(ids)) == 1
    assert len(job_rows(stack)) == 1
