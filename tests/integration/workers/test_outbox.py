"""Jobs triggered by writes travel through the transactional outbox."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from pydantic import BaseModel
from sqlalchemy import func, select

from asanoha.platform.errors import AccessDeniedError
from asanoha.platform.model import Access, Feature, SessionUser
from asanoha.platform.service import OutboxMessage
from asanoha.workers.outbox_publisher import CeleryOutboxPublisher
from tests.integration.workers.conftest import DEAD_BROKERS, job_runs

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])
STRANGER = SessionUser.of("stranger-1", "default", ["Guest"])


class Parcel(BaseModel):
    label: str


def _feature(received: list[str]) -> Feature:
    feature = Feature("post")

    @feature.write_handler("send", access=Access(roles=["Admin"]))
    def send(payload: Parcel, ctx: Any) -> dict[str, str]:
        return {"label": payload.label}

    @feature.write_handler("send-then-fail", access=Access(roles=["Admin"]))
    def send_then_fail(payload: Parcel, ctx: Any) -> None:
        ctx.write("post:write:send", {"label": payload.label})
        raise RuntimeError("the outer write fails after the nested one")

    @feature.job("deliver", on="post:write:send")
    def deliver(payload: dict[str, Any], ctx: Any) -> None:
        received.append(f"{payload['label']} for {ctx.tenant_id} by {ctx.triggered_by}")

    return feature


def _outbox_rows(stack: Any) -> list[Any]:
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        return list(conn.execute(select(outbox).order_by(outbox.c.created_at)).all())


def _count(stack: Any, table: Any) -> int:
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


class FlakyPublisher:
    """Raises for the first ``failures`` messages, then hands over to the real publisher."""

    def __init__(self, real: Any, failures: int) -> None:
        self.real = real
        self.failures = failures

    def publish(self, message: OutboxMessage) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("the broker went away after the commit")
        self.real.publish(message)


def test_a_committed_write_runs_its_job_with_the_validated_payload(jobs_stack):
    received: list[str] = []
    stack = jobs_stack([_feature(received)])
    stack.service.dispatch_write("post:write:send", {"label": "A1"}, ADMIN)
    stack.drain()
    assert received == ["A1 for default by admin-1"]
    (row,) = _outbox_rows(stack)
    (run,) = job_runs(stack, "post:job:deliver")
    # The task id is the outbox row id: a republish is the same logical job.
    assert run.task_id == str(row.id)
    assert (row.state, row.attempt) == ("succeeded", 1)


def test_a_denied_write_enqueues_nothing(jobs_stack):
    received: list[str] = []
    stack = jobs_stack([_feature(received)])
    with stack.capture_writes() as writes, pytest.raises(AccessDeniedError):
        stack.service.dispatch_write("post:write:send", {"label": "A1"}, STRANGER)
    assert writes == []
    stack.drain()
    assert received == []
    assert _count(stack, stack.tables.outbox) == 0
    assert job_runs(stack) == []


def test_a_failing_write_rolls_back_the_outbox_rows_of_its_nested_writes(jobs_stack):
    received: list[str] = []
    stack = jobs_stack([_feature(received)])
    with stack.capture_writes() as writes, pytest.raises(RuntimeError):
        stack.service.dispatch_write("post:write:send-then-fail", {"label": "A1"}, ADMIN)
    # The nested write did insert its outbox row, inside the transaction that rolled back.
    assert any("asanoha_outbox" in statement for statement in writes)
    stack.drain()
    assert received == []
    assert _count(stack, stack.tables.outbox) == 0
    assert job_runs(stack) == []


def test_a_publish_failing_after_commit_is_delivered_by_the_relay(jobs_stack):
    received: list[str] = []
    stack = jobs_stack([_feature(received)])
    real = stack.service.publisher
    stack.service.publisher = FlakyPublisher(real, failures=1)
    stack.service.dispatch_write("post:write:send", {"label": "A1"}, ADMIN)
    assert stack.service.count_unpublished_outbox() == 1
    stack.drain()
    assert received == ["A1 for default by admin-1"]
    (row,) = _outbox_rows(stack)
    assert row.published_at is not None
    assert row.publish_attempts == 2
    (run,) = job_runs(stack, "post:job:deliver")
    assert run.task_id == str(row.id)


def test_jobs_written_while_the_broker_is_unreachable_run_once_it_is_back(jobs_stack, broker):
    received: list[str] = []
    stack = jobs_stack([_feature(received)])
    real = stack.service.publisher
    unreachable = Celery("unreachable", broker=DEAD_BROKERS[broker], set_as_current=False)
    route = stack.app.celery_jobs.publisher.route
    stack.service.publisher = CeleryOutboxPublisher(unreachable, route)
    labels = ["A1", "A2", "A3"]
    for label in labels:
        # The writes commit although the broker cannot take their jobs.
        assert stack.service.dispatch_write("post:write:send", {"label": label}, ADMIN)
    assert stack.service.count_unpublished_outbox() == 3

    stack.service.publisher = real
    stack.drain()
    assert sorted(received) == [f"{label} for default by admin-1" for label in labels]
    runs = job_runs(stack, "post:job:deliver")
    assert sorted(r.task_id for r in runs) == sorted(str(row.id) for row in _outbox_rows(stack))
    assert stack.service.count_unpublished_outbox() == 0
