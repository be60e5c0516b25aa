"""Job priorities: among the messages waiting in a lane queue, a higher priority is
delivered first, on Redis and RabbitMQ; a run's priority overrides its job's."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature

BLOCK, WORK, PLAIN = "prio:job:block", "prio:job:work", "prio:job:plain"


class Gate:
    def __init__(self) -> None:
        self.started = threading.Semaphore(0)
        self.release = [threading.Event() for _ in range(3)]
        self.order: list[str] = []
        self.ran = threading.Event()


def prio_feature(gate: Gate) -> Feature:
    feature = Feature("prio")

    @feature.job("block", manual=True)
    def block(payload: dict[str, Any], ctx: Any) -> None:
        gate.started.release()
        assert gate.release[payload["n"]].wait(30)

    @feature.job("work", manual=True, priority=1)
    def work(payload: dict[str, Any], ctx: Any) -> None:
        gate.order.append(payload["name"])
        gate.ran.set()

    @feature.job("plain", manual=True)
    def plain(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def test_a_higher_priority_waiting_in_the_queue_is_delivered_first(jobs_stack):
    gate = Gate()
    stack = jobs_stack([prio_feature(gate)])
    # The worker's three threads are busy: what comes next waits in the queue.
    for n in range(3):
        stack.dispatch_job(BLOCK, {"n": n})
    for _ in range(3):
        assert gate.started.acquire(timeout=30)
    for name in ("low-1", "low-2"):
        stack.dispatch_job(WORK, {"name": name}, priority=0)
    stack.dispatch_job(WORK, {"name": "declared"})
    stack.dispatch_job(WORK, {"name": "high"}, priority=9)
    # One thread frees: it takes the highest priority waiting.
    gate.release[0].set()
    assert gate.ran.wait(30)
    for event in gate.release[1:]:
        event.set()
    stack.drain()
    assert gate.order[0] == "high"
    assert sorted(gate.order) == ["declared", "high", "low-1", "low-2"]
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        stored = dict(
            conn.execute(
                select(outbox.c.payload["name"].as_string(), outbox.c.priority).where(
                    outbox.c.job_qn == WORK
                )
            ).all()
        )
    assert stored == {"low-1": 0, "low-2": 0, "declared": 1, "high": 9}


def test_a_priority_outside_0_to_9_or_for_a_job_without_one_is_refused(jobs_stack):
    stack = jobs_stack([prio_feature(Gate())])
    with stack.nothing_written(), pytest.raises(ValueError, match=f"{WORK}: priority= is a whole"):
        stack.dispatch_job(WORK, {"name": "x"}, priority=10)
    with stack.nothing_written(), pytest.raises(ValueError, match=f"{PLAIN}: the job declares no"):
        stack.dispatch_job(PLAIN, {}, priority=3)


@pytest.mark.parametrize("priority", [-1, 10, 1.5, True, "high"])
def test_a_job_priority_outside_0_to_9_is_refused_at_definition(priority):
    with pytest.raises(DefinitionError, match=r"p:job:x: priority must be a whole number"):
        Feature("p").job("x", manual=True, priority=priority)


def test_the_relay_sends_due_rows_higher_priority_first(asanoha_stack):
    from asanoha.platform.jobs.publishing import relay_outbox

    gate = Gate()
    stack = asanoha_stack(features=[prio_feature(gate)])
    # Held in the rows (no publisher in a stack without jobs): the relay sends them.
    ids = {}
    for name, priority in (("low", 0), ("high", 9), ("mid", 5), ("default", None)):
        ids[stack.app.jobs.run(WORK, {"name": name}, priority=priority, publish=False)] = name
    outbox = stack.tables.outbox
    with stack.db.begin() as conn:
        conn.execute(outbox.update().values(relay_after=outbox.c.created_at))
    sent: list[tuple[str, int | None]] = []

    class Publisher:
        def publish(self, message: Any) -> None:
            sent.append((ids[message.id], message.priority))

    assert relay_outbox(stack.db, stack.tables, Publisher(), limit=10) == 4
    # The job's own priority (1) is the default of a run that names none.
    assert sent == [("high", 9), ("mid", 5), ("default", 1), ("low", 0)]
    with stack.db.connect() as conn:
        published = conn.execute(select(outbox.c.published_at)).scalars().all()
    assert all(at is not None for at in published)
