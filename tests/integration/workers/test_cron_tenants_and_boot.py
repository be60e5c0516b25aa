"""Per-tenant cron ticks, missed ticks (``catch_up``), and boot jobs (``run_on_boot``)."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import update

from asanoha import App
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature
from asanoha.workers.beat import CRON_TASK_NAME, PRUNE_TASK_NAME
from asanoha.workers.boot_jobs import enqueue_boot_jobs, release_of
from asanoha.workers.cron_tasks import enqueue_cron_tick
from asanoha.workers.lanes import queue_name
from tests.integration.workers.conftest import job_rows

TENANTS = ("acme", "globex", "initech")


def tenant_feature(seen: list[Any]) -> Feature:
    feature = Feature("fanout")

    @feature.job("report", cron="*/5 * * * *", per_tenant=True)
    def report(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(ctx.tenant_id)

    @feature.job("digest", cron="0 * * * *", catch_up=True)
    def digest(payload: dict[str, Any], ctx: Any) -> None:
        seen.append("digest")

    @feature.job("plain", cron="0 * * * *")
    def plain(payload: dict[str, Any], ctx: Any) -> None:
        seen.append("plain")

    return feature


def stack_with_tenants(asanoha_stack: Any, seen: list[Any]) -> Any:
    return asanoha_stack(features=[tenant_feature(seen)], tenants=lambda: TENANTS)


def test_a_per_tenant_tick_runs_once_per_tenant_however_often_it_is_sent(asanoha_stack):
    seen: list[Any] = []
    stack = stack_with_tenants(asanoha_stack, seen)
    app = stack.app
    tick = "2026-05-04T12:00:00+00:00"

    def send(_: int) -> list[Any]:
        return enqueue_cron_tick(
            app.service, app.settings, "fanout:job:report", tick, tenants=app.tenants
        )

    with ThreadPoolExecutor(3) as pool:
        sent = list(pool.map(send, range(3)))
    assert all(ids == sent[0] for ids in sent)
    rows = job_rows(stack, "fanout:job:report")
    assert sorted(row.headers["tenant_id"] for row in rows) == sorted(TENANTS)
    assert sorted(row.idempotency_key for row in rows) == [
        f"fanout:job:report@cron:{tick}@{tenant}" for tenant in sorted(TENANTS)
    ]


def test_per_tenant_ticks_run_as_each_tenant(asanoha_stack, broker):
    from tests.integration.workers.conftest import BROKERS

    seen: list[Any] = []
    stack = asanoha_stack(
        features=[tenant_feature(seen)],
        jobs=True,
        settings={"broker_url": BROKERS[broker]},
        tenants=lambda: TENANTS,
    )
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    tick = "2026-05-04T12:05:00+00:00"
    for _ in range(2):
        stack.app.celery.send_task(CRON_TASK_NAME, args=["fanout:job:report", tick], queue=queue)
    stack.drain()
    assert sorted(seen) == sorted(TENANTS)


def test_a_missed_tick_is_not_replayed_unless_the_job_catches_up(asanoha_stack):
    seen: list[Any] = []
    stack = stack_with_tenants(asanoha_stack, seen)
    app = stack.app
    now = dt.datetime(2026, 5, 4, 15, 30, tzinfo=dt.UTC)

    def tick(job: str, at: dt.datetime, sent: dt.datetime) -> list[Any]:
        return enqueue_cron_tick(
            app.service, app.settings, job, at.isoformat(), sent=sent.isoformat()
        )

    on_time = now.replace(hour=12, minute=0)
    assert len(tick("fanout:job:plain", on_time, on_time + dt.timedelta(seconds=2))) == 1
    assert len(tick("fanout:job:digest", on_time, on_time + dt.timedelta(seconds=2))) == 1
    # Beat was down from 12:30 to 15:30: it sends the 15:00 tick late, once.
    late = now.replace(minute=0)
    assert tick("fanout:job:plain", late, now) == []
    replayed = tick("fanout:job:digest", late, now)
    assert len(replayed) == 3
    keys = sorted(row.idempotency_key for row in job_rows(stack, "fanout:job:digest"))
    assert keys == [f"fanout:job:digest@cron:2026-05-04T{h}:00:00+00:00" for h in (12, 13, 14, 15)]
    assert len(job_rows(stack, "fanout:job:plain")) == 1


def test_per_tenant_needs_a_cron_and_the_apps_tenants():
    feature = Feature("misdeclared")
    with pytest.raises(DefinitionError, match="misdeclared:job:a: per_tenant=True applies to"):
        feature.job("a", manual=True, per_tenant=True)
    feature.job("b", cron="* * * * *", per_tenant=True)(lambda payload, ctx: None)
    with pytest.raises(DefinitionError, match=r"misdeclared:job:b runs per tenant.*tenants="):
        App([feature])


def boot_feature(seen: list[Any]) -> Feature:
    feature = Feature("startup")

    @feature.job("warm", run_on_boot=True)
    def warm(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(ctx.trigger_name)

    return feature


def test_a_boot_job_runs_once_per_release(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([boot_feature(seen)], release="r1")
    stack.drain()
    assert seen == ["boot"]
    app = stack.app
    # More workers of the same release start: nothing more runs.
    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(lambda _: enqueue_boot_jobs(app.service, app.settings), range(4)))
    assert all(found == ids[0] for found in ids)
    stack.drain()
    assert seen == ["boot"]
    [row] = job_rows(stack, "startup:job:warm")
    assert row.idempotency_key == "startup:job:warm@boot:r1"


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_boot_job_runs_once_per_release_also_after_the_prune(asanoha_stack, database):
    seen: list[Any] = []
    stack = asanoha_stack(
        features=[boot_feature(seen), tenant_feature(seen)],
        jobs=True,
        database=database,
        settings={"release": "r1", "job_retention_days": 1},
        tenants=lambda: TENANTS,
    )
    app = stack.app
    enqueue_cron_tick(app.service, app.settings, "fanout:job:plain", "2026-05-04T12:00:00+00:00")
    stack.drain()
    assert sorted(seen) == ["boot", "plain"]
    # Both records ended longer ago than the retention, and the hourly prune runs.
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(update(outbox).values(finished_at=long_ago))
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    stack.app.celery.send_task(PRUNE_TASK_NAME, queue=queue)
    stack.drain()
    assert job_rows(stack, "fanout:job:plain") == []
    # The next worker of the release starts: the record says the release ran it.
    enqueue_boot_jobs(app.service, app.settings)
    stack.drain()
    assert sorted(seen) == ["boot", "plain"]
    [row] = job_rows(stack)
    assert (row.state, row.idempotency_key) == ("succeeded", "startup:job:warm@boot:r1")


def test_the_default_release_follows_the_definitions(asanoha_stack):
    first = asanoha_stack(features=[boot_feature([])]).app
    same = release_of(first.registry, first.settings)
    assert same == release_of(first.registry, first.settings)
    other = Feature("startup")
    other.job("warm", run_on_boot=True)(lambda payload, ctx: None)
    other.job("cool", manual=True)(lambda payload, ctx: None)
    second = App([other], first.settings)
    assert release_of(second.registry, second.settings) != same


def test_a_tick_sent_on_time_runs(asanoha_stack):
    seen: list[Any] = []
    stack = asanoha_stack(features=[tenant_feature(seen)], jobs=True, tenants=lambda: TENANTS)
    queue = queue_name(stack.app.settings.queue_prefix, "worker")
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    stack.app.celery.send_task(
        CRON_TASK_NAME,
        args=["fanout:job:plain", now.isoformat(), dt.datetime.now(dt.UTC).isoformat()],
        queue=queue,
    )
    stack.drain()
    assert seen == ["plain"]
