"""Event-triggered jobs and the Celery driver: the job-trigger consumer enqueues through the
outbox once per (job, event); ``drain()`` waits for the whole cascade; a commit wakes the
consumers through one task; every worker ticks them."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import func, select, update

from asanoha import Access, Feature
from asanoha.platform.consumers import JOB_TRIGGER_CONSUMER, ConsumerContext, ConsumerDeadError
from asanoha.platform.store import StoredEvent
from asanoha.testing import TestUsers
from asanoha.workers import DrainTimeoutError

#: No consumer driver besides drain(): no wake-up task, no worker tick.
NO_DRIVER = {"consumer_wake": False, "consumer_tick_interval": 0}
#: Seconds a test waits for the background driver (a bound, not a measurement).
WAIT = 20


class Order(BaseModel):
    item: str


class Ring(BaseModel):
    n: int


class Shipment(BaseModel):
    order: str
    item: str


def shop(ran: list[dict[str, Any]]) -> Feature:
    """write order -> job A (pack) -> ctx.write ship appends shop:event:shipped -> job B."""
    feature = Feature("shop")
    shipped = feature.event("shipped", Shipment)

    @feature.write_handler("order", access=Access(roles=["Admin"]))
    def order(payload: Order, ctx: Any) -> dict[str, str]:
        return {"order": str(uuid.uuid4())}

    @feature.write_handler("ship", access=Access(roles=["system"]))
    def ship(payload: Shipment, ctx: Any) -> int:
        return int(ctx.append_event(shipped, payload, stream_id=payload.order).id)

    @feature.job("pack", on="shop:write:order")
    def pack(payload: dict[str, Any], ctx: Any) -> None:
        ctx.write("shop:write:ship", {"order": str(uuid.uuid4()), "item": payload["item"]})

    @feature.job("notify", on=shipped.qn)
    def notify(payload: dict[str, Any], ctx: Any) -> None:
        event = ctx.trigger_event
        ran.append(
            {
                "payload": payload,
                "event": event,
                "tenant": ctx.tenant_id,
                "trigger": ctx.trigger_name,
            }
        )

    return feature


def test_write_job_event_job_cascade_is_drained_without_a_background_driver(asanoha_stack):
    ran: list[dict[str, Any]] = []
    stack = asanoha_stack(features=[shop(ran)], jobs=True, settings=NO_DRIVER)
    stack.http.write_ok("shop:write:order", {"item": "kettle"}, TestUsers.admin)
    stack.drain(timeout=20)
    [run] = ran
    event: StoredEvent = run["event"]
    assert event.type == "shop:event:shipped"
    assert run["payload"] == event.payload == {"order": event.stream_id, "item": "kettle"}
    assert run["tenant"] == event.tenant_id == TestUsers.admin.tenant_id
    assert run["trigger"] == "shop:event:shipped"


def test_a_redelivered_event_starts_no_second_job(asanoha_stack):
    ran: list[dict[str, Any]] = []
    stack = asanoha_stack(features=[shop(ran)], jobs=True, settings=NO_DRIVER)
    stack.http.write_ok("shop:write:order", {"item": "kettle"}, TestUsers.admin)
    stack.drain(timeout=20)
    # Rewind the job-trigger consumer: it sees the event again.
    consumers = stack.tables.consumers
    with stack.db.begin() as conn:
        conn.execute(
            update(consumers).where(consumers.c.name == JOB_TRIGGER_CONSUMER).values(position=0)
        )
    assert stack.consumers.run_once() == 1
    stack.drain(timeout=20)
    assert len(ran) == 1
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        notify_rows = conn.execute(
            select(func.count()).where(outbox.c.job_qn == "shop:job:notify")
        ).scalar_one()
    assert notify_rows == 1


def _follower(seen: threading.Event) -> Feature:
    feature = Feature("wake")
    feature.event("rang", None)

    @feature.write_handler("ring", access=Access(roles=["Admin"]))
    def ring(payload: Ring, ctx: Any) -> None:
        ctx.append_event("wake:event:rang", {"n": payload.n}, stream_id=str(uuid.uuid4()))

    @feature.consumer("listen", on=["wake:event:rang"])
    def listen(event: StoredEvent, ctx: ConsumerContext) -> None:
        seen.set()

    @feature.job("unused", manual=True)
    def unused(payload: dict[str, Any], ctx: Any) -> None:
        return None

    return feature


def test_a_commit_that_appends_a_followed_event_wakes_the_consumers(asanoha_stack):
    seen = threading.Event()
    stack = asanoha_stack(
        features=[_follower(seen)],
        jobs=True,
        settings={"consumer_wake": True, "consumer_tick_interval": 0},
    )
    stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
    # Nobody here advances the consumers: the worker runs the published advance task.
    assert seen.wait(WAIT)


def test_every_worker_ticks_the_consumers(asanoha_stack):
    seen = threading.Event()
    stack = asanoha_stack(
        features=[_follower(seen)],
        jobs=True,
        settings={"consumer_wake": False, "consumer_tick_interval": 0.05},
    )
    stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
    assert seen.wait(WAIT)


def _stuck(max_attempts: int) -> Feature:
    feature = _follower(threading.Event())

    @feature.consumer("refuse", on=["wake:event:rang"], max_attempts=max_attempts)
    def refuse(event: StoredEvent, ctx: ConsumerContext) -> None:
        raise LookupError(f"no mailbox for event {event.id}")

    return feature


def test_drain_with_jobs_names_a_dead_consumer(asanoha_stack):
    stack = asanoha_stack(features=[_stuck(2)], jobs=True, settings=NO_DRIVER)
    stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
    with pytest.raises(ConsumerDeadError) as raised:
        stack.drain(timeout=20)
    assert "wake:consumer:refuse is dead at event" in str(raised.value)
    assert "LookupError: no mailbox for event" in str(raised.value)


def test_a_drain_timeout_with_jobs_lists_the_consumers_behind(asanoha_stack):
    stack = asanoha_stack(features=[_stuck(1_000_000)], jobs=True, settings=NO_DRIVER)
    stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
    with pytest.raises(DrainTimeoutError) as raised:
        stack.drain(timeout=0.5)
    assert "consumers behind: wake:consumer:refuse (lag 1)" in str(raised.value)
