"""Messages the broker lost: the relay sends a published, unclaimed row again only when its
queue misses its message, never for its age alone (a backlog longer than the visibility
timeout gets no copies); ``/health/jobs`` and ``asanoha_outbox_unclaimed_rows`` count the
published rows nobody claimed in time."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import signals
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select, update

from asanoha import Feature
from asanoha.platform.jobs.publishing import CONFIRM_LOST, relay_outbox
from asanoha.platform.model import SessionUser
from asanoha.testing import HttpError
from asanoha.workers.lanes import lane_queues
from tests.integration.workers.conftest import job_rows, job_runs, wait_until
from tests.private_redis import PrivateRedis

SYSTEM = SessionUser.system("default")
#: Jobs in the backlog, and how long each runs on one of the stack's three worker threads:
#: about 12 s of work, longer than the visibility timeout below.
BACKLOG_JOBS = 150
JOB_SECONDS = 0.25
#: The shortest visibility timeout a job of ``JOB_TIMEOUT`` passes at boot with.
VISIBILITY_TIMEOUT = 8.0
JOB_TIMEOUT = 1.0


def lost_feature() -> Feature:
    feature = Feature("lost")

    @feature.job("slow", manual=True)
    def slow(payload: dict[str, Any], ctx: Any) -> None:
        time.sleep(JOB_SECONDS)

    @feature.job("tick", manual=True)
    def tick(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


@pytest.fixture
def publishes() -> Iterator[list[str]]:
    """The task ids of every job message this process sends, in order."""
    sent: list[str] = []

    def capture(sender: Any = None, headers: Any = None, **_: Any) -> None:
        if isinstance(sender, str) and sender.startswith("lost:job:"):
            sent.append(headers["id"])

    signals.before_task_publish.connect(capture, weak=False)
    try:
        yield sent
    finally:
        signals.before_task_publish.disconnect(capture)


def queued(stack: Any) -> int:
    """Messages in the stack's lane queues."""
    depths, _ = stack.app.celery_jobs.probe().count(lane_queues(stack.app.settings))
    return sum(depths.values())


def published_long_ago(stack: Any, ago: dt.timedelta, count: int = 3) -> list[uuid.UUID]:
    """``count`` job rows published ``ago`` (no worker runs: their messages stay queued)."""
    ids = [stack.service.enqueue_job("lost:job:tick", {}, SYSTEM) for _ in range(count)]
    outbox = stack.tables.outbox
    these = outbox.c.id.in_(ids)
    now = dt.datetime.now(dt.UTC)
    with stack.db.begin() as conn:
        conn.execute(update(outbox).where(these).values(relay_after=now))
    assert relay_outbox(stack.db, stack.tables, stack.app.celery_jobs.publisher, limit=10) == count
    with stack.db.begin() as conn:
        conn.execute(
            update(outbox).where(these).values(published_at=now - ago, not_before=now - ago)
        )
    return [uuid.UUID(str(row_id)) for row_id in ids]


def resent_by_the_relay(stack: Any, expected: int) -> int:
    """Run relay passes until they sent ``expected`` rows again, and one pass more; return
    how many they sent."""
    relay = stack.app.celery_jobs.relay
    started = time.monotonic()
    sent = [relay.relay_once()]
    wait_until(lambda: sent.append(relay.relay_once()) or sum(sent) >= expected, timeout=30)
    assert time.monotonic() - started >= CONFIRM_LOST
    return sum(sent) + relay.relay_once()


def test_a_backlog_longer_than_the_visibility_timeout_gets_no_copies(
    private_redis: PrivateRedis, asanoha_stack: Any, publishes: list[str]
) -> None:
    # A private Redis: the stack's short visibility timeout would make its worker restore
    # other tests' unacknowledged messages on a shared one.
    stack = asanoha_stack(
        features=[lost_feature()],
        jobs=True,
        settings={
            "broker_url": private_redis.url,
            "visibility_timeout": VISIBILITY_TIMEOUT,
            "job_timeout": JOB_TIMEOUT,
            "relay_interval": 0.05,
        },
    )
    relay = stack.app.celery_jobs.relay
    relay.start()
    try:
        for n in range(BACKLOG_JOBS):
            stack.dispatch_job("lost:job:slow", {"n": n})

        def all_finished() -> bool:
            return {row.state for row in job_rows(stack)} == {"succeeded"}

        wait_until(all_finished, timeout=120)
        # Counted when the last job ended, before anything could consume a copy.
        left = queued(stack)
    finally:
        relay.stop()
    rows = job_rows(stack)
    # The backlog outlasted the visibility timeout: the last rows waited longer than it.
    assert max((row.started_at - row.created_at).total_seconds() for row in rows) > (
        VISIBILITY_TIMEOUT
    )
    assert left == 0
    assert len(publishes) == BACKLOG_JOBS
    assert len(job_runs(stack)) == BACKLOG_JOBS


def test_an_old_message_still_in_its_queue_is_not_sent_again(
    private_redis: PrivateRedis, asanoha_stack: Any, publishes: list[str]
) -> None:
    stack = asanoha_stack(features=[lost_feature()], settings={"broker_url": private_redis.url})
    published_long_ago(stack, dt.timedelta(hours=2))
    relay = stack.app.celery_jobs.relay
    assert [relay.relay_once() for _ in range(3)] == [0, 0, 0]
    assert queued(stack) == 3
    assert len(publishes) == 3


def test_messages_of_a_flushed_broker_are_sent_again_once_found_missing_for_a_while(
    private_redis: PrivateRedis, asanoha_stack: Any, publishes: list[str]
) -> None:
    stack = asanoha_stack(features=[lost_feature()], settings={"broker_url": private_redis.url})
    ids = published_long_ago(stack, dt.timedelta(hours=2))
    client = redis.Redis.from_url(private_redis.url)
    try:
        client.flushdb()
    finally:
        client.close()
    # Sent once every pass found them missing for CONFIRM_LOST seconds (a message a worker
    # just took is missing for a moment too); the copies are queued, nothing more is sent.
    assert resent_by_the_relay(stack, 3) == 3
    assert queued(stack) == 3
    assert sorted(publishes[3:]) == sorted(str(row_id) for row_id in ids)
    assert {row.publish_attempts for row in job_rows(stack)} == {2}


def test_a_partly_lost_queue_gets_copies_of_its_oldest_rows_only(
    private_redis: PrivateRedis, asanoha_stack: Any, publishes: list[str]
) -> None:
    stack = asanoha_stack(features=[lost_feature()], settings={"broker_url": private_redis.url})
    older = published_long_ago(stack, dt.timedelta(hours=3), count=2)
    published_long_ago(stack, dt.timedelta(hours=2), count=2)
    client = redis.Redis.from_url(private_redis.url)
    try:
        # The queue is consumed in order: its head (the oldest messages) is what is lost.
        (queue,) = {key for key in client.scan_iter() if client.type(key) == b"list"}
        for _ in older:
            client.rpop(queue)
    finally:
        client.close()
    assert resent_by_the_relay(stack, 2) == 2
    assert sorted(publishes[4:]) == sorted(str(row_id) for row_id in older)
    assert queued(stack) == 4


def unclaimed_gauge(stack: Any) -> float:
    text = stack.http.client.get("/metrics").text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return samples["asanoha_outbox_unclaimed_rows"]


def test_jobs_whose_queue_was_flushed_are_reported_unclaimed_after_the_threshold(
    private_redis: PrivateRedis, asanoha_stack: Any
) -> None:
    stack = asanoha_stack(
        features=[lost_feature()],
        settings={"broker_url": private_redis.url, "unclaimed_alert_seconds": 60},
    )
    published_long_ago(stack, dt.timedelta(seconds=0))
    client = redis.Redis.from_url(private_redis.url)
    try:
        client.flushdb()
    finally:
        client.close()
    # Lost, but not for long yet: nothing to report.
    assert unclaimed_gauge(stack) == 0
    assert stack.http.client.get("/health/jobs").status_code == 200

    outbox = stack.tables.outbox
    two_minutes_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2)
    with stack.db.begin() as conn:
        conn.execute(
            update(outbox).values(published_at=two_minutes_ago, not_before=two_minutes_ago)
        )
        # A retry held until later is not late, however long ago it was published.
        held = conn.execute(select(outbox.c.id).limit(1)).scalar_one()
        conn.execute(
            update(outbox)
            .where(outbox.c.id == held)
            .values(not_before=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1))
        )
    assert unclaimed_gauge(stack) == 2
    # Readiness is the process's own: a broker that lost its data does not take it out.
    assert stack.http.client.get("/health/ready").status_code == 200
    jobs = stack.http.client.get("/health/jobs")
    assert jobs.status_code == 503
    checks = HttpError.from_response(jobs).details["checks"]
    assert checks["broker"] == "ok"
    assert checks["jobs"] == "ok"
    assert checks["unclaimed"].startswith("2 published job(s) not claimed within 60 s")
