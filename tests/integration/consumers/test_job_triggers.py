"""Event-triggered jobs and the Celery driver: the job-trigger consumer enqueues through the
outbox once per (job, event); ``drain()`` waits for the whole cascade; a commit wakes the
consumers through one task; every worker ticks them; every driver honours the backoff."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from celery.signals import task_postrun
from pydantic import BaseModel
from sqlalchemy import func, select, update

from asanoha import Access, Backoff, Feature
from asanoha.platform.consumers import JOB_TRIGGER_CONSUMER, ConsumerContext, ConsumerDeadError
from asanoha.platform.store import StoredEvent
from asanoha.testing import TestUsers
from asanoha.workers import DrainTimeoutError
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME
from tests.integration.consumers.conftest import EXPIRING_DRAIN

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

    @feature.consumer(
        "refuse", on=["wake:event:rang"], max_attempts=max_attempts, backoff=Backoff.fixed(0)
    )
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
        stack.drain(timeout=EXPIRING_DRAIN)
    assert "consumers behind: wake:consumer:refuse (lag 1; stopped at event" in str(raised.value)
    assert "LookupError: no mailbox for event" in str(raised.value)


def test_without_the_tick_a_wake_up_that_finds_the_cursor_held_is_not_lost(asanoha_stack):
    # The advance task finds the cursor locked by someone whose scan came before the event
    # (here a transaction of the test's). Nothing else would ever advance it.
    seen = threading.Event()
    stack = asanoha_stack(
        features=[_follower(seen)],
        jobs=True,
        settings={"consumer_wake": True, "consumer_tick_interval": 0},
    )
    stack.consumers.register()
    advanced = threading.Event()

    def on_postrun(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == ADVANCE_TASK_NAME:
            advanced.set()

    task_postrun.connect(on_postrun, weak=False)
    consumers = stack.tables.consumers
    try:
        with stack.db.engine.connect() as holder:
            holder.begin()
            holder.execute(
                select(consumers.c.name)
                .where(consumers.c.name == "wake:consumer:listen")
                .with_for_update()
            )
            stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
            assert advanced.wait(WAIT), "the wake-up never ran"
            assert not seen.is_set()
            holder.commit()
        assert seen.wait(WAIT)
    finally:
        task_postrun.disconnect(on_postrun)


def _flaky(backoff: Backoff, seen: threading.Event, calls: list[float]) -> Feature:
    feature = _follower(threading.Event())

    @feature.consumer("flaky", on=["wake:event:rang"], backoff=backoff)
    def flaky(event: StoredEvent, ctx: ConsumerContext) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ConnectionError("the partner's API is down")
        seen.set()

    return feature


@pytest.mark.parametrize(
    "driver",
    [
        {"consumer_wake": False, "consumer_tick_interval": 0.05},
        {"consumer_wake": True, "consumer_tick_interval": 0},
    ],
    ids=["tick", "wake-up-without-tick"],
)
def test_every_driver_waits_for_the_backoff_and_then_tries_again(asanoha_stack, driver):
    seen = threading.Event()
    calls: list[float] = []
    stack = asanoha_stack(
        features=[_flaky(Backoff.fixed(1.0), seen, calls)], jobs=True, settings=driver
    )
    stack.http.write_ok("wake:write:ring", {"n": 1}, TestUsers.admin)
    # Nobody writes again: the driver itself comes back when the next attempt is due.
    assert seen.wait(WAIT)
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 1.0


def test_the_job_trigger_consumer_takes_its_partitions_from_the_setting(asanoha_stack):
    ran: list[dict[str, Any]] = []
    stack = asanoha_stack(
        features=[shop(ran)], jobs=True, settings={**NO_DRIVER, "job_trigger_partitions": 3}
    )
    for item in ("kettle", "pan", "cup", "lid"):
        stack.http.write_ok("shop:write:order", {"item": item}, TestUsers.admin)
    stack.drain(timeout=20)
    assert sorted(run["payload"]["item"] for run in ran) == ["cup", "kettle", "lid", "pan"]
    [status] = [s for s in stack.consumers.status() if s.name == JOB_TRIGGER_CONSUMER]
    assert [part.partition for part in status.partitions] == [0, 1, 2]
