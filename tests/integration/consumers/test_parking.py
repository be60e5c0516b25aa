"""A consumer of a toggleable feature parks the events of a tenant that switched the feature
off and goes on with every other tenant's; once the feature is on again it delivers the
parked events first, in order, then the newer ones, on Postgres and SQLite."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from sqlalchemy import func, select

from asanoha.handlers import consumer_admin
from asanoha.platform.consumers import ConsumerStatus
from asanoha.platform.consumers.operations import consumer_statuses
from asanoha.platform.model import SessionUser
from asanoha.platform.store import StoredEvent
from tests.integration.console.test_console_operations import console_page
from tests.integration.consumers.conftest import Recorder, append, ledger

NAME = "ledger:consumer:follow"
OFF, ON = "tenant-off", "tenant-on"
OPERATOR = SessionUser.of("ops-1", "ops", ["SystemAdmin"])


def switch(stack: Any, tenant: str, *, enabled: bool) -> None:
    with stack.db.begin() as conn:
        stack.service.feature_settings.set_enabled(conn, tenant, "ledger", enabled, "test")


def status_of(stack: Any, tenant_id: str | None = None) -> ConsumerStatus:
    with stack.db.connect() as conn:
        [status] = consumer_statuses(conn, stack.tables, [NAME], tenant_id=tenant_id)
    return status


def parked_rows(stack: Any) -> int:
    with stack.db.connect() as conn:
        query = select(func.count()).select_from(stack.tables.consumer_parked)
        return int(conn.execute(query).scalar_one())


def delivered(recorder: Recorder) -> list[tuple[str, int]]:
    return [(event.tenant_id, event.payload["n"]) for event in recorder.events]


def test_a_switched_off_tenants_events_are_parked_and_the_others_flow(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, toggleable=True)])
    switch(stack, OFF, enabled=False)
    for n in range(4):
        append(stack, "s", n, tenant=OFF if n % 2 == 0 else ON)

    stack.consumers.run_once([NAME])
    # The other tenant's events are not held behind the switched-off tenant's.
    assert delivered(recorder) == [(ON, 1), (ON, 3)]
    status = status_of(stack)
    assert (status.status, status.lag, status.parked, status.attempts) == ("idle", 0, 2, 0)
    assert (status.event_id, status.last_error, status.behind) == (None, None, False)
    # Each tenant sees its own parked events only.
    assert (status_of(stack, OFF).parked, status_of(stack, ON).parked) == (2, 0)
    # Nothing is pending for drain(): the parked events wait for the switch.
    stack.drain(timeout=30)
    assert len(recorder.events) == 2

    switch(stack, OFF, enabled=True)
    append(stack, "s", 4, tenant=OFF)
    stack.consumers.run_once([NAME])
    assert delivered(recorder)[2:] == [(OFF, 0), (OFF, 2), (OFF, 4)]
    assert (status_of(stack).parked, parked_rows(stack)) == (0, 0)


def test_parked_events_go_back_a_batch_at_a_time_before_any_newer_event(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, toggleable=True)])
    switch(stack, OFF, enabled=False)
    for n in range(5):
        append(stack, "s", n, tenant=OFF)
    stack.consumers.run_once([NAME])
    assert status_of(stack).parked == 5

    switch(stack, OFF, enabled=True)
    append(stack, "s", 5, tenant=OFF)
    stack.app.consumers._batch_size = 2
    passes = []
    while True:
        result = stack.consumers.advance(NAME)
        passes.append([n for _, n in delivered(recorder)])
        if not result.progressed:
            break
    # A full batch of parked events leaves the scan to the next pass: the newer event comes
    # only once every parked one is delivered.
    assert passes[:3] == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]
    assert parked_rows(stack) == 0


def test_a_failing_parked_event_stops_its_partition_until_skipped(consumer_stack):
    fail: set[int] = {0}
    recorder = Recorder()

    def handler(event: StoredEvent, ctx: Any) -> None:
        if event.payload["n"] in fail:
            raise RuntimeError(f"cannot take {event.payload['n']}")
        recorder(event, ctx)

    stack = consumer_stack([ledger(handler, toggleable=True)])
    switch(stack, OFF, enabled=False)
    first = append(stack, "s", 0, tenant=OFF)
    append(stack, "s", 1, tenant=OFF)
    stack.consumers.run_once([NAME])
    switch(stack, OFF, enabled=True)

    stack.consumers.run_once([NAME])
    status = status_of(stack)
    assert (status.event_id, status.attempts, status.parked) == (first.id, 1, 2)
    assert "cannot take 0" in (status.last_error or "")
    assert recorder.events == []

    assert stack.consumers.skip(NAME) == first.id
    assert status_of(stack).parked == 1
    stack.consumers.run_once([NAME])
    assert delivered(recorder) == [(OFF, 1)]
    status = status_of(stack)
    assert (status.event_id, status.attempts, status.parked) == (None, 0, 0)


def test_a_restarted_parked_event_is_delivered_once(consumer_stack):
    fail: set[int] = {0}
    recorder = Recorder()

    def handler(event: StoredEvent, ctx: Any) -> None:
        if event.payload["n"] in fail:
            raise RuntimeError("not yet")
        recorder(event, ctx)

    stack = consumer_stack([ledger(handler, toggleable=True, max_attempts=1)])
    switch(stack, OFF, enabled=False)
    append(stack, "s", 0, tenant=OFF)
    append(stack, "s", 1, tenant=ON)
    stack.consumers.run_once([NAME])
    switch(stack, OFF, enabled=True)
    stack.consumers.run_once([NAME])
    assert status_of(stack).status == "dead"
    fail.clear()
    stack.consumers.restart(NAME)
    stack.consumers.run_once([NAME])
    stack.consumers.run_once([NAME])
    assert delivered(recorder) == [(ON, 1), (OFF, 0)]
    assert (status_of(stack).status, parked_rows(stack)) == ("idle", 0)


def test_each_partition_parks_and_returns_its_own_streams_in_order(consumer_stack):
    recorder = Recorder()
    stack = consumer_stack([ledger(recorder, toggleable=True, partitions=3)])
    switch(stack, OFF, enabled=False)
    appended = [append(stack, f"s{i % 6}", i, tenant=OFF) for i in range(30)]
    others = [append(stack, f"s{i % 6}", 100 + i, tenant=ON) for i in range(6)]
    stack.consumers.run_once([NAME])
    assert sorted(recorder.ids) == sorted(event.id for event in others)
    status = status_of(stack)
    assert status.parked == 30
    assert sum(part.parked for part in status.partitions) == 30

    switch(stack, OFF, enabled=True)
    stack.consumers.run_once([NAME])
    assert sorted(recorder.ids) == sorted(event.id for event in [*appended, *others])
    for stream in {event.stream_id for event in appended}:
        versions = [
            e.version for e in recorder.events if (e.tenant_id, e.stream_id) == (OFF, stream)
        ]
        assert versions == sorted(versions) and len(versions) == 5
    assert parked_rows(stack) == 0


def test_the_admin_status_counts_parked_events_in_each_tenants_view(consumer_stack):
    from asanoha.handlers import consumer_admin
    from asanoha.platform.model import SessionUser

    operator = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
    admin_off = SessionUser.of("admin-off", OFF, ["SystemAdmin"])
    admin_on = SessionUser.of("admin-on", ON, ["SystemAdmin"])
    stack = consumer_stack(
        [ledger(Recorder(), toggleable=True), consumer_admin.feature],
        settings={"operator_tenant": "ops"},
    )
    switch(stack, OFF, enabled=False)
    append(stack, "s", 0, tenant=OFF)
    append(stack, "s", 1, tenant=OFF)
    stack.consumers.run_once([NAME])

    def seen_by(user: Any) -> tuple[int, int]:
        [status] = stack.http.query_ok("consumer-admin:query:status", {}, user)
        return status["lag"], status["parked"]

    assert seen_by(operator) == (0, 2)
    assert seen_by(admin_off) == (0, 2)
    assert seen_by(admin_on) == (0, 0)


def test_the_consumers_page_shows_the_parked_events_beside_the_lag(consumer_stack, browser):
    stack = consumer_stack(
        [ledger(Recorder(), toggleable=True), consumer_admin.feature],
        settings={"operator_tenant": OPERATOR.tenant_id},
    )
    switch(stack, OFF, enabled=False)
    for n in range(3):
        append(stack, "s", n, tenant=OFF)
    append(stack, "s", 3, tenant=ON)
    append(stack, "t", 0, tenant=ON)
    stack.consumers.run_once([NAME])
    assert (status_of(stack).lag, status_of(stack).parked) == (0, 3)

    with console_page(stack, browser, OPERATOR) as page:
        page.goto(page.url.replace("/jobs", "/consumers"))
        row = page.locator(f'tr[data-consumer="{NAME}"]:not(.partition)')
        expect(row.locator(".lag")).to_have_text("0 +3 parked")
        expect(row.locator(".parked")).to_have_text("+3 parked")
