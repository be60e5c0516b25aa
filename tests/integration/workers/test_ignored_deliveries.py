"""A delivery that runs nothing (the row ended, its job paused) ends in Celery as ``IGNORED``,
acknowledged, with a ``task-ignored`` event for Flower; never as a ``SUCCESS``."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import redis
from celery import signals

from asanoha.platform.model import Feature
from asanoha.platform.service import OutboxMessage
from asanoha.workers.ignored_deliveries import IGNORED_EVENT
from tests.integration.workers.conftest import job_rows

#: Seconds to wait for an event that was sent.
EVENT_TIMEOUT = 30


def _feature(calls: list[int]) -> Feature:
    feature = Feature("ignoring")

    @feature.job("once", manual=True)
    def once(payload: dict[str, Any], ctx: Any) -> None:
        calls.append(ctx.attempt)

    return feature


@contextlib.contextmanager
def celery_states() -> Iterator[list[tuple[str, str]]]:
    """The (task id, state) of each delivery the in-process worker ends, as Celery's trace
    recorded it."""
    states: list[tuple[str, str]] = []

    def record(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
        states.append((str(task_id), str(state)))

    signals.task_postrun.connect(record, weak=False)
    try:
        yield states
    finally:
        signals.task_postrun.disconnect(record)


def unacked_copies(stack: Any, task_id: str) -> int:
    """Messages of ``task_id`` Redis holds as delivered and not acknowledged."""
    client = redis.Redis.from_url(stack.app.settings.broker_url)
    try:
        return sum(task_id.encode() in value for value in client.hvals("unacked"))
    finally:
        client.close()


def test_a_duplicate_of_an_ended_row_is_ignored_acknowledged_and_told_to_flower(asanoha_stack):
    calls: list[int] = []
    stack = asanoha_stack(features=[_feature(calls)], jobs=True)
    celery = stack.app.celery
    qn = "ignoring:job:once"
    with celery_states() as states:
        row_id = str(stack.dispatch_job(qn, {}))
        stack.drain()
        assert states == [(row_id, "SUCCESS")]
        received: list[dict[str, Any]] = []
        with celery.connection_for_read() as connection:
            receiver = celery.events.Receiver(connection, handlers={"*": received.append})
            with receiver.consumer_context(wakeup=False) as (consuming, _, _):
                # On Redis the receiver subscribes on its first read.
                with contextlib.suppress(TimeoutError):
                    consuming.drain_events(timeout=0.5)
                # A copy of the ended attempt's message (a redelivery, a second publish).
                stack.app.celery_jobs.publisher.publish(OutboxMessage(uuid.UUID(row_id), qn))
                stack.drain()
                deadline = time.monotonic() + EVENT_TIMEOUT
                while IGNORED_EVENT not in {e["type"] for e in received if e.get("uuid") == row_id}:
                    assert time.monotonic() < deadline, "no task-ignored event came"
                    with contextlib.suppress(TimeoutError):
                        consuming.drain_events(timeout=1)
    assert calls == [1]
    assert states == [(row_id, "SUCCESS"), (row_id, "IGNORED")]
    [ignored] = [e for e in received if e["type"] == IGNORED_EVENT]
    assert ignored["reason"] == "the row is succeeded at attempt 1"
    # Flower keeps the ended row's result: the copy sends none to overwrite it.
    assert "result" not in ignored
    assert unacked_copies(stack, row_id) == 0
    [row] = job_rows(stack, qn)
    assert (row.state, row.attempt) == ("succeeded", 1)


def test_a_delivery_of_a_paused_job_is_ignored_and_runs_after_the_resume(asanoha_stack):
    calls: list[int] = []
    stack = asanoha_stack(features=[_feature(calls)], jobs=True)
    qn = "ignoring:job:once"
    stack.app.jobs.pause(qn)
    with celery_states() as states:
        row_id = str(stack.app.jobs.run(qn, {}))
        # Paused after its message went out: the delivery finds the job paused.
        stack.app.celery_jobs.publisher.publish(OutboxMessage(uuid.UUID(row_id), qn))
        stack.drain()
        assert calls == []
        assert (row_id, "IGNORED") in states
        assert (row_id, "SUCCESS") not in states
        assert unacked_copies(stack, row_id) == 0
        stack.app.jobs.resume(qn)
        stack.drain()
    assert calls == [1]
    assert states[-1] == (row_id, "SUCCESS")
