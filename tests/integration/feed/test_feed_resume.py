"""The feed resumes without loss: a client that reconnects with its last id misses nothing
and gets nothing twice, a late commit below a sent position included, in per-stream order."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.platform.feed import hub
from asanoha.platform.feed.reader import Batch
from asanoha.platform.store import append_event
from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served
from tests.integration.feed.sse_client import open_stream
from tests.integration.workers.conftest import wait_until

ADMIN = TestUsers.admin


def create_ticket(stack: Stack, title: str) -> dict[str, object]:
    row: dict[str, object] = stack.http.write_ok("crm:write:ticket:create", {"title": title}, ADMIN)
    return row


def test_without_after_a_client_starts_at_the_head(stack: Stack, served: Served) -> None:
    create_ticket(stack, "before")
    with open_stream(served.base_url, served.token(ADMIN)) as admin:
        admin.read_until(lambda s: b"retry:" in s.raw)
        after = create_ticket(stack, "after")
        admin.read_until(lambda s: len(s.events) >= 1)
    assert [m.json["streamId"] for m in admin.events] == [after["id"]]


def test_a_client_resumes_after_its_last_id_with_nothing_twice(
    stack: Stack, served: Served
) -> None:
    titles = [f"t{i}" for i in range(6)]
    for title in titles[:3]:
        create_ticket(stack, title)
    with open_stream(served.base_url, served.token(ADMIN), {"after": 0}) as first:
        first.read_until(lambda s: len(s.events) == 3)
    last = first.ids[-1]
    for title in titles[3:]:
        create_ticket(stack, title)
    # Last-Event-ID (what a reconnecting EventSource sends) wins over after=.
    with open_stream(
        served.base_url,
        served.token(ADMIN),
        {"after": 0},
        headers={"Last-Event-ID": str(last)},
    ) as second:
        second.read_until(lambda s: len(s.events) == 3)
    seen = [m.json["payload"]["data"]["title"] for m in [*first.events, *second.events]]
    assert seen == titles
    assert min(second.ids) > last


def test_a_bad_position_is_refused(stack: Stack, served: Served) -> None:
    import httpx

    response = httpx.get(
        f"{served.base_url}/api/stream",
        params={"access_token": served.token(ADMIN), "after": "soon"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("validation_error", "validation_failed")
    assert error["details"]["fields"][0]["path"] == "after"
    unauthenticated = httpx.get(f"{served.base_url}/api/stream")
    assert unauthenticated.status_code == 401


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_stream_cut_while_it_catches_up_sends_no_live_event_past_a_hole(
    stack: Stack, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live events queue while a resuming client catches up; when the stream is cut before
    the catch-up ends, they are not sent: the client's last id stays below every id it has
    not had, and resuming from it misses nothing."""
    monkeypatch.setattr(hub, "CATCH_UP_PAGE", 1)
    before = [create_ticket(stack, f"b{i}")["id"] for i in range(60)]
    # The catch-up reads its first page, then waits for the cut: it cannot end before it.
    reader = served.feed._reader
    read_range, pages, cut_made = reader.read_range, [0], threading.Event()

    def held_read_range(*args: Any, **kwargs: Any) -> Any:
        pages[0] += 1
        if pages[0] > 1:
            cut_made.wait(30)
        return read_range(*args, **kwargs)

    monkeypatch.setattr(reader, "read_range", held_read_range)
    with open_stream(served.base_url, served.token(ADMIN), {"after": 0}) as cut:
        cut.read_until(lambda s: len(s.events) >= 1)
        live = create_ticket(stack, "live")
        with stack.app.service.database.connect() as conn:
            head = conn.execute(select(func.max(stack.app.service.tables.events.c.id))).scalar_one()
        wait_until(lambda: served.feed.position >= head)
        served.feed.close_subscriptions()
        cut_made.set()
        cut.read_to_end()
    sent = [m.json["streamId"] for m in cut.events]
    assert len(sent) < len(before), "the catch-up ended before the cut: nothing was tested"
    assert sent == before[: len(sent)]
    assert live["id"] not in sent
    with open_stream(
        served.base_url, served.token(ADMIN), headers={"Last-Event-ID": str(cut.ids[-1])}
    ) as resumed:
        resumed.read_until(lambda s: len(s.events) == len(before) + 1 - len(sent))
    assert [m.json["streamId"] for m in resumed.events] == [*before[len(sent) :], live["id"]]


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_a_client_that_subscribes_while_the_feed_reads_gets_what_that_read_found(
    stack: Stack, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed reads while nobody listens; a client subscribes before that read is handed
    out: the event it found reaches the client (live), neither skipped as already sent nor
    dropped as unprepared."""
    with open_stream(served.base_url, served.token(ADMIN)) as first:
        first.read_until(lambda s: b"retry:" in s.raw)
    wait_until(lambda: not served.feed.subscriptions)
    reader = served.feed._reader
    read = reader.read
    found, release = threading.Event(), threading.Event()

    def slow_read() -> Batch:
        batch = read()
        if batch.events:
            found.set()
            release.wait(10)
        return batch

    monkeypatch.setattr(reader, "read", slow_read)
    written = create_ticket(stack, "during a read")
    assert found.wait(10)
    with open_stream(served.base_url, served.token(ADMIN)) as second:
        second.read_until(lambda s: b"retry:" in s.raw)
        release.set()
        second.read_until(lambda s: len(s.events) == 1)
    assert [m.json["streamId"] for m in second.events] == [written["id"]]


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_a_late_commit_below_a_committed_id_is_sent_first(stack: Stack, served: Served) -> None:
    """A transaction that drew a lower id and commits after a higher one: the feed holds the
    higher one back, so the client gets both, in id order, and resuming after the higher one
    repeats nothing."""
    service = stack.app.service
    ticket = next(e for e in stack.registry.entities if e.name == "ticket")
    late_stream = str(uuid.uuid4())
    with open_stream(served.base_url, served.token(ADMIN)) as admin:
        admin.read_until(lambda s: b"retry:" in s.raw)
        with service.database.begin() as conn:
            late = append_event(
                conn,
                service.database.backend,
                service.tables,
                tenant_id=ADMIN.tenant_id,
                stream_id=late_stream,
                stream_type=ticket.key,
                expected_version=0,
                type=ticket.event_qn("created"),
                payload={"data": {"title": "late"}},
                metadata={},
                created_by=ADMIN.id,
            )
            early = create_ticket(stack, "early")
            # The early write has committed; the late one has not.
        admin.read_until(lambda s: len(s.events) == 2)
    assert [m.json["payload"]["data"]["title"] for m in admin.events] == ["late", "early"]
    assert admin.ids[0] == late.id and admin.ids == sorted(admin.ids)
    assert admin.events[1].json["streamId"] == early["id"]
    with open_stream(
        served.base_url, served.token(ADMIN), headers={"Last-Event-ID": str(admin.ids[-1])}
    ) as again:
        again.read_until(lambda s: b"retry:" in s.raw)
        marker = create_ticket(stack, "marker")
        again.read_until(lambda s: len(s.events) == 1)
    assert [m.json["streamId"] for m in again.events] == [marker["id"]]


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
def test_an_expired_token_ends_the_stream_with_reauth(stack: Stack, served: Served) -> None:
    with open_stream(served.base_url, served.token(ADMIN, ttl=1)) as admin:
        admin.read_to_end()
    reauth = admin.messages[-1]
    assert reauth.event == "reauth"
    assert reauth.json == {"lastEventId": 0}


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_an_id_whose_writer_rolled_back_does_not_hold_the_feed(
    stack: Stack, served: Served
) -> None:
    service = stack.app.service
    ticket = next(e for e in stack.registry.entities if e.name == "ticket")
    with open_stream(served.base_url, served.token(ADMIN)) as admin:
        admin.read_until(lambda s: b"retry:" in s.raw)
        conn = service.database.engine.connect()
        transaction = conn.begin()
        rolled_back = append_event(
            conn,
            service.database.backend,
            service.tables,
            tenant_id=ADMIN.tenant_id,
            stream_id=str(uuid.uuid4()),
            stream_type=ticket.key,
            expected_version=0,
            type=ticket.event_qn("created"),
            payload={"data": {"title": "never"}},
            metadata={},
            created_by=ADMIN.id,
        )
        after = create_ticket(stack, "after the rollback")
        transaction.rollback()
        conn.close()
        admin.read_until(lambda s: len(s.events) == 1)
    assert [m.json["streamId"] for m in admin.events] == [after["id"]]
    assert admin.ids[0] > rolled_back.id
