"""The hub's fan-out: one rendering per view shared by its subscriptions, never handed to a
subscription of another view; what waits goes out in one write, each event with its id."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

from asanoha.platform.feed import FeedFilter, FeedHub, FeedItem, Subscription
from asanoha.platform.feed.reader import Batch
from asanoha.platform.model import SessionUser
from asanoha.platform.store import StoredEvent

ALICE = SessionUser(id="alice", tenant_id="t1", roles=frozenset({"user"}))
ALICE_ADMIN = SessionUser(id="alice", tenant_id="t1", roles=frozenset({"user", "admin"}))
BOB = SessionUser(id="bob", tenant_id="t2", roles=frozenset({"user"}))
EVERY = FeedFilter()


class RecordingAccess:
    """Who sees what, as a stub: a caller sees its tenant's events; the message names the
    roles it was made for, so a rendering for one view is told from another's."""

    def __init__(self) -> None:
        self.rendered: list[tuple[str, frozenset[str], int]] = []

    def visible(self, item: FeedItem, user: SessionUser) -> bool:
        return item.event.tenant_id == user.tenant_id

    def message(self, item: FeedItem, user: SessionUser) -> bytes:
        self.rendered.append((user.id, user.roles, item.id))
        return b'{"id":%d,"for":"%s"}' % (item.id, ",".join(sorted(user.roles)).encode())


def event(event_id: int, tenant_id: str = "t1") -> FeedItem:
    stored = StoredEvent(
        id=event_id,
        stream_id=f"s{event_id}",
        stream_type="crm:ticket",
        tenant_id=tenant_id,
        version=1,
        type="crm:event:ticket.created",
        schema_version=1,
        payload={},
        metadata={},
        created_at=dt.datetime(2026, 12, 7, tzinfo=dt.UTC),
        created_by="alice",
    )
    return FeedItem(stored, None)


class EmptyLog:
    """A reader of an event log with nothing in it."""

    types = ()

    def start(self) -> int:
        return 0

    def read(self) -> Batch:
        return Batch(events=[], watermark=0, more=False)


def hub_with(access: RecordingAccess, buffer: int = 100) -> FeedHub:
    reader: Any = EmptyLog()
    return FeedHub(reader, access, buffer=buffer, poll_interval=1.0)  # type: ignore[arg-type]


def subscribe(hub: FeedHub, user: SessionUser, after: int | None = None) -> Subscription:
    subscription = Subscription(
        user, EVERY, buffer=hub.buffer, start=0, after=after, expires_at=None
    )
    hub._subscriptions.add(subscription)
    return subscription


def queued(subscription: Subscription) -> list[bytes]:
    return [message for _, message in subscription.queue]


def test_subscriptions_of_one_view_share_one_rendering_per_event() -> None:
    access = RecordingAccess()
    hub = hub_with(access)
    tabs = [subscribe(hub, ALICE) for _ in range(3)]
    admin = subscribe(hub, ALICE_ADMIN)
    hub._fan_out([event(1), event(2)])
    # Two views (the same person with other roles is another view), two events each.
    assert sorted(access.rendered) == sorted(
        [(user.id, user.roles, n) for user in (ALICE, ALICE_ADMIN) for n in (1, 2)]
    )
    assert queued(tabs[0]) == queued(tabs[1]) == queued(tabs[2])
    assert queued(tabs[0]) == [
        b'id: 1\ndata: {"id":1,"for":"user"}\n\n',
        b'id: 2\ndata: {"id":2,"for":"user"}\n\n',
    ]
    assert queued(admin) == [
        b'id: 1\ndata: {"id":1,"for":"admin,user"}\n\n',
        b'id: 2\ndata: {"id":2,"for":"admin,user"}\n\n',
    ]


def test_a_caller_of_another_view_gets_its_own_rendering_not_the_shared_one() -> None:
    access = RecordingAccess()
    hub = hub_with(access)
    alice, bob = subscribe(hub, ALICE), subscribe(hub, BOB)
    hub._fan_out([event(1), event(2, tenant_id="t2"), event(3)])
    assert [event_id for event_id, _ in alice.queue] == [1, 3]
    assert [event_id for event_id, _ in bob.queue] == [2]
    assert not set(queued(alice)) & set(queued(bob))


def test_a_subscription_is_not_offered_what_it_was_sent_before_it_came() -> None:
    hub = hub_with(RecordingAccess())
    fresh, resumed = subscribe(hub, ALICE), subscribe(hub, ALICE, after=2)
    hub._fan_out([event(1), event(2), event(3)])
    assert [event_id for event_id, _ in fresh.queue] == [1, 2, 3]
    assert [event_id for event_id, _ in resumed.queue] == [3]


def test_a_batch_that_does_not_fit_the_buffer_overflows_that_subscription_only() -> None:
    hub = hub_with(RecordingAccess(), buffer=2)
    full, resumed = subscribe(hub, ALICE), subscribe(hub, ALICE, after=1)
    hub._fan_out([event(1), event(2), event(3)])
    assert full.overflowed and not full.queue
    assert not resumed.overflowed and [event_id for event_id, _ in resumed.queue] == [2, 3]


def test_waiting_messages_go_out_in_one_write_each_with_its_id_in_order() -> None:
    hub = hub_with(RecordingAccess())
    subscription = subscribe(hub, ALICE)
    hub._fan_out([event(1), event(2)])
    hub._fan_out([event(3)])

    async def first_writes() -> list[bytes]:
        messages: AsyncIterator[bytes] = hub.messages(subscription)
        writes = [await anext(messages), await anext(messages)]
        await messages.aclose()  # type: ignore[attr-defined]
        return writes

    retry, chunk = asyncio.run(first_writes())
    assert retry == b"retry: 1000\n\n"
    assert chunk == (
        b'id: 1\ndata: {"id":1,"for":"user"}\n\n'
        b'id: 2\ndata: {"id":2,"for":"user"}\n\n'
        b'id: 3\ndata: {"id":3,"for":"user"}\n\n'
    )
    assert subscription.last_id == 3


def test_an_idle_stream_ends_with_reauth_when_its_token_expires() -> None:
    hub = hub_with(RecordingAccess())

    async def writes_until_the_end() -> list[bytes]:
        subscription = await hub.subscribe(ALICE, EVERY, expires_at=time.time() + 0.2)
        # Nothing is ever queued: only the expiry's timer wakes the stream (the guard ends a
        # stream that is never woken instead of hanging the suite).
        async with asyncio.timeout(60):
            return [message async for message in hub.messages(subscription)]

    async def run() -> list[bytes]:
        try:
            return await writes_until_the_end()
        finally:
            await hub.stop()

    writes = asyncio.run(run())
    assert writes[-1].startswith(b"event: reauth\n")
    assert not hub.subscriptions


def test_an_idle_stream_gets_heartbeat_comments_from_its_own_timer() -> None:
    hub = hub_with(RecordingAccess())

    async def first_writes() -> list[bytes]:
        subscription = await hub.subscribe(ALICE, EVERY, heartbeat=0.01)
        messages = hub.messages(subscription)
        try:
            async with asyncio.timeout(60):
                return [await anext(messages) for _ in range(3)]
        finally:
            await messages.aclose()
            await hub.stop()

    assert asyncio.run(first_writes()) == [b"retry: 1000\n\n", b": ping\n\n", b": ping\n\n"]


def test_a_stream_that_receives_events_gets_no_heartbeat() -> None:
    loop = asyncio.new_event_loop()
    try:
        subscription = Subscription(
            ALICE, EVERY, buffer=10, start=0, after=None, expires_at=None, heartbeat=5.0
        )
        subscription.start_timers(loop)
        # Its heartbeat timer goes off just after an event was written: no ping.
        subscription.sent_at = time.monotonic()
        subscription._beat(loop)
        assert not subscription.beat
        # And after a heartbeat's time without one: a ping.
        subscription.sent_at = time.monotonic() - 5.0
        subscription._beat(loop)
        assert subscription.beat
        subscription.stop_timers()
    finally:
        loop.close()
