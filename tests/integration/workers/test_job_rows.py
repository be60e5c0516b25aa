"""The job row is the record: claims, dedupe, refusals, retries through the row, sanitised
errors, the message as a pointer."""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from typing import Any

import pytest
from celery import signals
from pydantic import BaseModel
from sqlalchemy import text, update

from asanoha.platform.errors import AccessDeniedError, Reasons, ValidationError
from asanoha.platform.jobs.attempts import recover_lost_attempts
from asanoha.platform.jobs.enqueue import write_outbox
from asanoha.platform.jobs.publishing import relay_outbox
from asanoha.platform.model import Access, Backoff, Feature, SessionUser
from asanoha.platform.service import OutboxMessage
from asanoha.workers import JobFailedError
from asanoha.workers.job_health import check_job_backlog
from tests.integration.workers.conftest import job_rows, job_runs, wait_until

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])


class Parcel(BaseModel):
    label: str


def _feature(seen: list[Any]) -> Feature:
    feature = Feature("rows")

    @feature.write_handler("send", access=Access(roles=["Admin"]))
    def send(payload: Parcel, ctx: Any) -> dict[str, str]:
        return {"label": payload.label, "stamp": "s-1"}

    @feature.job("deliver", on="rows:write:send")
    def deliver(payload: dict[str, Any], ctx: Any) -> None:
        seen.append((payload["label"], ctx.trigger.name, ctx.trigger.result))

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("once", ctx.attempt))

    @feature.job("flaky", manual=True, retries=1, backoff=Backoff.fixed(0.05))
    def flaky(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("flaky", ctx.attempt))
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    @feature.job("nul", manual=True)
    def nul(payload: dict[str, Any], ctx: Any) -> None:
        raise RuntimeError("bad byte \x00 and lone \ud800 surrogate " + "x" * 10_000)

    @feature.job("denied", manual=True, retries=3, backoff=Backoff.fixed(0.01))
    def denied(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("denied", ctx.attempt))
        raise AccessDeniedError(Reasons.ROLE_REQUIRED, handler="rows:write:send", roles="Admin")

    @feature.job(
        "invalid-retried",
        manual=True,
        retries=1,
        backoff=Backoff.fixed(0.01),
        retry_on=[ValidationError],
    )
    def invalid_retried(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("invalid-retried", ctx.attempt))
        raise ValidationError(handler="rows:write:send", fields=[])

    @feature.job("slow", manual=True, timeout=0.3)
    def slow(payload: dict[str, Any], ctx: Any) -> None:
        time.sleep(3)
        seen.append(("slow", "finished"))

    @feature.job("patient", manual=True, retries=1, backoff=Backoff.fixed(1.0))
    def patient(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(("patient", ctx.attempt))
        if ctx.attempt == 1:
            raise RuntimeError("not yet")

    return feature


class FailingPublisher:
    """Refuses every message, like a broker that went away."""

    def __init__(self) -> None:
        self.refused: list[OutboxMessage] = []

    def publish(self, message: OutboxMessage) -> None:
        self.refused.append(message)
        raise ConnectionError("the broker went away")


def test_a_write_triggered_job_sees_the_handlers_result(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    stack.service.dispatch_write("rows:write:send", {"label": "A1"}, ADMIN)
    stack.drain()
    assert seen == [("A1", "rows:write:send", {"label": "A1", "stamp": "s-1"})]
    (row,) = job_rows(stack)
    assert (row.state, row.attempt, row.trigger_result) == ("succeeded", 1, seen[0][2])


def test_the_message_carries_only_the_row_id_and_the_attempt(jobs_stack):
    seen: list[Any] = []
    published: list[dict[str, Any]] = []

    def capture(sender: Any = None, body: Any = None, headers: Any = None, **_: Any) -> None:
        if sender == "rows:job:deliver":
            published.append({"body": body, "headers": headers})

    signals.before_task_publish.connect(capture, weak=False)
    try:
        stack = jobs_stack([_feature(seen)])
        stack.service.dispatch_write("rows:write:send", {"label": "Ada Lovelace"}, ADMIN)
        stack.drain()
    finally:
        signals.before_task_publish.disconnect(capture)
    (message,) = published
    assert "Ada" not in repr(message)
    args, kwargs, _ = message["body"]
    assert (list(args), kwargs) == ([], {"attempt": 1})
    assert message["headers"]["id"] == str(job_rows(stack)[0].id)


def test_a_republished_job_runs_once_and_is_recorded_once(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    task_id = stack.dispatch_job("rows:job:once", {})
    stack.drain()
    # The relay (or a writer whose "mark published" failed) sends the same row again.
    publisher = stack.app.celery_jobs.publisher
    publisher.publish(OutboxMessage(uuid.UUID(task_id), "rows:job:once", attempt=1))
    publisher.publish(OutboxMessage(uuid.UUID(task_id), "rows:job:once", attempt=1))
    stack.drain()
    assert seen == [("once", 1)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "succeeded")]


def test_a_retry_whose_publish_fails_stays_due_and_the_relay_sends_it(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    runner = stack.app.celery_jobs.runner
    failing = FailingPublisher()
    real, runner.publisher = runner.publisher, failing
    try:
        stack.dispatch_job("rows:job:flaky", {})
        summary = stack.drain()
    finally:
        runner.publisher = real
    assert [m.attempt for m in failing.refused] == [2]
    assert seen == [("flaky", 1), ("flaky", 2)]
    assert (summary.retried, summary.succeeded) == (1, 1)
    (row,) = job_rows(stack)
    assert (row.state, row.attempt) == ("succeeded", 2)


def test_a_long_backoff_waits_in_the_database_and_the_relay_sends_it_when_due(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)], broker_countdown_max=0.1)
    published: list[Any] = []

    def capture(sender: Any = None, headers: Any = None, **_: Any) -> None:
        if sender == "rows:job:patient":
            published.append(headers.get("eta"))

    signals.before_task_publish.connect(capture, weak=False)
    try:
        stack.dispatch_job("rows:job:patient", {})
        stack.drain()
    finally:
        signals.before_task_publish.disconnect(capture)
    assert seen == [("patient", 1), ("patient", 2)]
    # The retry reached the broker only once due, from the relay: no message waited in Redis.
    assert len(published) == 2
    assert published[1] is None
    first, second = sorted(job_runs(stack), key=lambda run: run.attempt)
    assert (second.started_at - first.finished_at).total_seconds() >= 1.0


def test_an_error_with_nul_and_surrogates_is_recorded_sanitised_and_reported(jobs_stack):
    stack = jobs_stack([_feature([])])
    stack.dispatch_job("rows:job:nul", {})
    with pytest.raises(JobFailedError, match=r"bad byte \\x00 and lone \\ud800"):
        stack.drain()
    (run,) = job_runs(stack)
    assert run.status == "failed"
    assert "\x00" not in run.error
    assert len(run.error) <= 4000
    (row,) = job_rows(stack)
    assert (row.state, row.last_error) == ("failed", run.error)


def test_a_4xx_error_fails_at_once_without_retries(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    stack.dispatch_job("rows:job:denied", {})
    with pytest.raises(JobFailedError, match="rows:job:denied"):
        stack.drain()
    assert seen == [("denied", 1)]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "failed")]


def test_retry_on_retries_even_a_4xx_error(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    stack.dispatch_job("rows:job:invalid-retried", {})
    with pytest.raises(JobFailedError):
        stack.drain()
    assert seen == [("invalid-retried", 1), ("invalid-retried", 2)]


def test_a_job_over_its_timeout_fails_in_the_test_stack(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    stack.dispatch_job("rows:job:slow", {})
    with pytest.raises(JobFailedError, match="JobTimeLimitExceeded"):
        stack.drain()
    assert ("slow", "finished") not in seen


def test_a_job_row_without_a_tenant_is_refused_and_recorded_failed(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    row_id = uuid.uuid4()
    with stack.db.begin() as conn:
        write_outbox(conn, stack.tables, [OutboxMessage(row_id, "rows:job:once", {}, {})])
    stack.app.celery_jobs.publisher.publish(OutboxMessage(row_id, "rows:job:once"))
    with pytest.raises(JobFailedError, match="no tenant_id"):
        stack.drain()
    assert seen == []
    (row,) = job_rows(stack)
    assert row.state == "failed"


def test_a_message_without_a_job_row_is_refused_and_recorded_failed(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    stack.app.celery_jobs.publisher.publish(OutboxMessage(uuid.uuid4(), "rows:job:once"))
    with pytest.raises(JobFailedError, match="no job row"):
        stack.drain()
    assert seen == []


def test_enqueue_with_an_idempotency_key_enqueues_once(asanoha_stack):
    stack = asanoha_stack(features=[_feature([])])
    user = SessionUser.system("default")
    first = stack.service.enqueue_job("rows:job:once", {}, user, idempotency_key="k-1")
    again = stack.service.enqueue_job("rows:job:once", {}, user, idempotency_key="k-1")
    other = stack.service.enqueue_job("rows:job:once", {}, user, idempotency_key="k-2")
    assert first == again != other
    assert len(job_rows(stack)) == 2


@pytest.mark.parametrize(
    "publish_first", [False, True], ids=["lost-then-publish", "publish-then-lost"]
)
def test_a_write_answers_its_result_when_marking_published_fails_after_commit(
    jobs_stack, publish_first
):
    """The database goes away between the commit and "mark published": the caller still
    gets the committed write's result, and its job still runs. Killed after the publish,
    the connections die while the worker may be claiming or ending the job: it sends the
    claim or end again on a new connection, and the job runs once."""
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    real = stack.service.publisher
    database_name = stack.database_name

    def lose_the_database() -> None:
        # Every connection of the stack dies, as in a database restart.
        with stack.app.celery_jobs.app.database.engine.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": database_name},
            )

    class LoseTheDatabaseAroundThePublish:
        def publish(self, message: OutboxMessage) -> None:
            if not publish_first:
                lose_the_database()
            real.publish(message)
            if publish_first:
                lose_the_database()

    stack.service.publisher = LoseTheDatabaseAroundThePublish()
    try:
        result = stack.service.dispatch_write("rows:write:send", {"label": "B2"}, ADMIN)
    finally:
        stack.service.publisher = real
    assert result == {"label": "B2", "stamp": "s-1"}
    stack.drain()
    assert [label for label, *_ in seen] == ["B2"]
    assert [(r.attempt, r.status) for r in job_runs(stack)] == [(1, "succeeded")]


@pytest.mark.parametrize("retries", [0, 1])
def test_an_attempt_whose_end_was_lost_is_ended_as_crashed_by_the_relay(asanoha_stack, retries):
    stack = asanoha_stack(features=[_feature([])])
    task_id = stack.service.enqueue_job("rows:job:once", {}, SessionUser.system("default"))
    outbox = stack.tables.outbox
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    with stack.db.begin() as conn:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == task_id)
            .values(state="running", attempt=1, started_at=long_ago)
        )
    recovered = recover_lost_attempts(stack.db, stack.tables, lambda qn: retries, 3600)
    assert recovered == 1
    (row,) = job_rows(stack)
    (run,) = job_runs(stack)
    if retries:
        # The next attempt is due at once: the relay publishes it.
        assert (row.state, row.attempt, row.published_at) == ("pending", 1, None)
        assert run.status == "crashed"
    else:
        assert row.state == "failed"
        assert run.status == "failed"
    assert "WorkerLostError" in run.error
    assert recover_lost_attempts(stack.db, stack.tables, lambda qn: retries, 3600) == 0


def test_a_message_lost_by_the_broker_is_sent_again_after_the_visibility_timeout(jobs_stack):
    seen: list[Any] = []
    stack = jobs_stack([_feature(seen)])
    row_id = uuid.uuid4()
    headers = {"tenant_id": "default", "trigger_name": "manual"}
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    with stack.db.begin() as conn:
        # Published two hours ago, never claimed: the broker lost the message.
        write_outbox(conn, stack.tables, [OutboxMessage(row_id, "rows:job:once", {}, headers)])
        conn.execute(
            update(stack.tables.outbox)
            .where(stack.tables.outbox.c.id == row_id)
            .values(published_at=long_ago, relay_after=long_ago, not_before=long_ago)
        )
    publisher = stack.app.celery_jobs.publisher
    assert relay_outbox(stack.db, stack.tables, publisher, limit=10) == 0
    # Its queue holds no message for it: the relay sends it again once its passes found it
    # missing for a few seconds.
    relay = stack.app.celery_jobs.relay
    sent = [relay.relay_once()]
    wait_until(lambda: sent.append(relay.relay_once()) or sum(sent) > 0)
    assert sum(sent) == 1
    stack.drain()
    assert seen == [("once", 1)]


def test_job_health_fails_naming_the_age_of_a_due_job_nobody_published(asanoha_stack):
    stack = asanoha_stack(features=[_feature([])])
    task_id = stack.service.enqueue_job("rows:job:once", {}, SessionUser.system("default"))
    assert check_job_backlog(stack.db, stack.tables) == "ok"
    ten_minutes_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    with stack.db.begin() as conn:
        outbox = stack.tables.outbox
        conn.execute(
            update(outbox)
            .where(outbox.c.id == task_id)
            .values(not_before=ten_minutes_ago, relay_after=ten_minutes_ago)
        )
    cause = check_job_backlog(stack.db, stack.tables)
    # At least the ten minutes set above (a slow machine adds seconds).
    waited = re.fullmatch(r"the oldest due job has waited (\d+) s to be published", cause)
    assert waited is not None and int(waited[1]) >= 600, cause
