"""Ordered, exactly-once delivery; start positions; the context; status and lag."""

from __future__ import annotations

from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent
from tests.integration.consumers.conftest import TENANT, Recorder, append, ledger

FOLLOW = "ledger:consumer:follow"


def test_committed_events_are_delivered_once_in_order(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder)])
    written = [append(stack, f"s{i % 3}", i).id for i in range(25)]
    assert stack.consumers.run_once() == 25
    assert recorder.ids == written
    assert stack.consumers.run_once() == 0
    assert recorder.ids == written
    assert recorder.tenants == [TENANT] * 25
    assert recorder.events[3].payload == {"n": 3}


def test_a_pass_reads_in_batches_until_caught_up(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder)])
    stack.app.consumers._batch_size = 7
    written = [append(stack, "s", i).id for i in range(30)]
    assert stack.consumers.run_once() == 30
    assert recorder.ids == written


def test_events_of_other_types_are_passed_over(consumer_stack):
    recorder = Recorder()
    other = ledger(name="other")
    stack = consumer_stack([ledger(recorder), other])
    mine = []
    for i in range(10):
        append(stack, "o", i, feature="other")
        mine.append(append(stack, "m", i).id)
    stack.consumers.run_once()
    assert recorder.ids == mine


def test_a_consumer_starting_now_skips_history(asanoha_stack, database):
    before = Recorder()
    stack = asanoha_stack(features=[ledger(before)], database=database)
    append(stack, "s", 1)
    later = Recorder()
    # A second application on the same database registers a new consumer starting now.
    from asanoha.app import App

    app = App([ledger(before), ledger(later, name="late", start="now")], stack.app.settings)
    try:
        app.create_schema()
        new = append(stack, "t", 2, feature="late")
        app.consumers.run_once()
        assert later.ids == [new.id]
    finally:
        app.close()


def test_status_reports_position_and_lag(consumer_stack):
    stack = consumer_stack([ledger(Recorder())])
    for i in range(4):
        append(stack, "s", i)
    [status] = stack.consumers.status()
    assert (status.name, status.position, status.lag, status.status) == (FOLLOW, 0, 4, "idle")
    stack.consumers.run_once()
    [status] = stack.consumers.status()
    assert (status.lag, status.attempts, status.last_error) == (0, 0, None)
    assert status.position >= 4


def test_the_handler_writes_in_the_pass_as_the_tenants_system_user(consumer_stack):
    def handler(event: StoredEvent, ctx: ConsumerContext) -> None:
        ctx.entity("entry").create({"note": f"n={event.payload['n']}", "event_id": event.id})

    stack = consumer_stack([ledger(handler)])
    event = append(stack, "s", 7)
    stack.consumers.run_once()
    table = stack.tables.entity("ledger:entry")
    with stack.db.connect() as conn:
        rows = conn.execute(table.select()).mappings().all()
    assert [(r["note"], r["event_id"], r["tenant_id"], r["created_by"]) for r in rows] == [
        ("n=7", event.id, TENANT, "system")
    ]


def test_disable_stops_delivery_and_enable_resumes(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder)])
    stack.consumers.disable(FOLLOW)
    event = append(stack, "s")
    stack.consumers.run_once()
    assert recorder.ids == []
    assert stack.consumers.status()[0].status == "disabled"
    stack.consumers.enable(FOLLOW)
    stack.consumers.run_once()
    assert recorder.ids == [event.id]
