"""One feed reader per process, fanning out to all of its clients.

The hub runs as one task on the server's event loop. It reads (in a thread) when a commit of
this process announces new events (the service's commit listeners, as consumers are woken)
and, for commits of other processes, every ``poll_interval`` seconds: one query per process
per wake-up, however many clients listen. Each batch is prepared once (upcast, opened, rows
for owner rules), then rendered once per view (the same caller, filter and stream handler:
the access decisions and the message depend on nothing else) into the messages as they go on
the wire; every subscription of that view queues the same bytes. A thousand tabs of one user
cost one rendering, not a thousand.

Each subscription has a bounded queue. A client that does not keep up (its socket does not
drain) is dropped once ``buffer`` messages wait: it gets ``event: overflow`` with the last id
it was sent and resumes from there. So one slow client costs its queue, never the others'
time. A client whose token expires, or is revoked, gets ``event: reauth`` and the stream
ends: the hub asks which of its clients' tokens were revoked every
``REVOCATION_CHECK_SECONDS`` (one call for all of them, answered from the verifier's cached
revocations), so a revoked token stops receiving within the time any call is refused.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Sequence

import pydantic_core

from asanoha.platform.feed import sse
from asanoha.platform.feed.access import FeedAccess, FeedItem
from asanoha.platform.feed.context import StreamContext
from asanoha.platform.feed.filters import FeedFilter
from asanoha.platform.feed.reader import FeedReader
from asanoha.platform.model import SessionUser
from asanoha.platform.model.handlers import StreamHandlerDef
from asanoha.platform.store import StoredEvent

#: Events a resuming client reads per query while it catches up.
CATCH_UP_PAGE = 500
#: Bytes of waiting messages sent in one write.
COALESCE_BYTES = 64 * 1024
#: Seconds between two checks of the clients' tokens against the revocations.
REVOCATION_CHECK_SECONDS = 2.0

log = logging.getLogger("asanoha.feed")


class Subscription:
    """One client's place on the feed."""

    def __init__(
        self,
        user: SessionUser,
        filter: FeedFilter,
        *,
        buffer: int,
        start: int,
        after: int | None,
        expires_at: float | None,
        handler: StreamHandlerDef | None = None,
        heartbeat: float | None = None,
    ) -> None:
        self.user = user
        #: The stream handler that makes each message (``None``: the event as it is).
        self.handler = handler
        self.context = StreamContext(user)
        self.filter = filter
        self.buffer = buffer
        #: The hub's settled position when the client subscribed: live events come after it.
        self.start = start
        #: The last id written to the client (what it resumes from).
        self.last_id = start if after is None else after
        #: Live events up to here were sent by the catch-up, or before the client came.
        self.skip_until = max(start, self.last_id)
        self.expires_at = expires_at
        #: Seconds without a message after which a heartbeat comment is written (``None``:
        #: none).
        self.heartbeat = heartbeat
        #: A heartbeat is to be written (its timer went off).
        self.beat = False
        #: When (``time.monotonic``) events were last written: a stream that receives them
        #: needs no heartbeat, and 1,000 streams subscribed together would otherwise all
        #: ping at once, in the middle of deliveries.
        self.sent_at = time.monotonic()
        #: What decides its messages: subscriptions with equal views are sent the same bytes.
        #: ``SessionUser`` compares every field an access rule reads (not the token's id and
        #: expiry, which decide only when the stream ends).
        self.view: Hashable = (user, filter, None if handler is None else handler.qn)
        #: (event id, the message as it goes on the wire), oldest first.
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()
        self.overflowed = False
        self.closed = False
        #: Its token was revoked: the stream ends with ``reauth`` and sends nothing more.
        self.revoked = False
        #: Its token's expiry came (the timer ``expire_at`` set went off).
        self.expired = False
        self._expiry: asyncio.TimerHandle | None = None
        self._heartbeat: asyncio.TimerHandle | None = None
        self._ready = asyncio.Event()

    def offer(self, messages: Sequence[tuple[int, bytes]]) -> bool:
        """Queue the messages (``(event id, wire bytes)``, oldest first) it has not been
        sent; ``False`` (and the subscription overflowed) when they do not fit its queue."""
        if self.overflowed or self.closed:
            return False
        if messages and messages[0][0] <= self.skip_until:
            messages = [each for each in messages if each[0] > self.skip_until]
        if not messages:
            return True
        if len(self.queue) + len(messages) > self.buffer:
            self.overflowed = True
            self.queue.clear()
            self._ready.set()
            return False
        self.queue.extend(messages)
        self._ready.set()
        return True

    def revoke(self) -> None:
        """End the stream at once: its token was revoked."""
        self.revoked = True
        self._ready.set()

    def close(self) -> None:
        """End the stream once what is queued is sent (the client reconnects and resumes)."""
        self.closed = True
        self._ready.set()

    def expire(self) -> None:
        """End the stream with ``reauth``: its token expired."""
        self.expired = True
        self._ready.set()

    def start_timers(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the stream when its token expires and for each heartbeat (on ``loop``, the
        server's): a timer for the stream's life and one per heartbeat, not a timeout on
        every wait (a wait per message and client)."""
        if self.expires_at is not None and self._expiry is None:
            self._expiry = loop.call_later(max(0.0, self.expires_at - time.time()), self.expire)
        if self.heartbeat is not None and self._heartbeat is None:
            self._heartbeat = loop.call_later(self.heartbeat, self._beat, loop)

    def stop_timers(self) -> None:
        """The stream ended: nothing more wakes it."""
        for timer in (self._expiry, self._heartbeat):
            if timer is not None:
                timer.cancel()

    def _beat(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.heartbeat is not None
        idle = time.monotonic() - self.sent_at
        if idle >= self.heartbeat:
            self.beat = True
            self._ready.set()
            idle = 0.0
        self._heartbeat = loop.call_later(self.heartbeat - idle, self._beat, loop)

    async def wait(self) -> None:
        """Until something is queued or the subscription ends (or its token expires)."""
        await self._ready.wait()
        self._ready.clear()


class FeedHub:
    """The reader of one process and its subscriptions."""

    def __init__(
        self,
        reader: FeedReader,
        access: FeedAccess,
        *,
        buffer: int,
        poll_interval: float,
        revoked: Callable[[SessionUser], bool] | None = None,
    ) -> None:
        self._reader = reader
        self._access = access
        #: Whether a client's token was revoked since it subscribed (``None``: not asked).
        self._revoked = revoked
        self._revocations_checked = time.monotonic()
        self.buffer = buffer
        self.poll_interval = poll_interval
        self._subscriptions: set[Subscription] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        #: Reads done (one query each), for the bench and the tests' bounds.
        self.reads = 0
        #: Every event up to here has been offered to the subscriptions of its time; a new
        #: subscription catches up to it and takes live events after it. Kept on the loop,
        #: beside the fan-out, never from the reader (whose reads run in a thread and are
        #: ahead of what has been offered while a read is under way).
        self._position = 0

    @property
    def position(self) -> int:
        """The id up to which the feed has read and handed out every event."""
        return self._position

    @property
    def subscriptions(self) -> frozenset[Subscription]:
        """The clients connected now."""
        return frozenset(self._subscriptions)

    def notify(self, events: Sequence[StoredEvent] = ()) -> None:
        """Wake the reader: events were committed (a commit listener; any thread)."""
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        # The loop may close meanwhile (the server is stopping): then nobody listens.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake.set)

    async def subscribe(
        self,
        user: SessionUser,
        filter: FeedFilter,
        *,
        after: int | None = None,
        expires_at: float | None = None,
        handler: StreamHandlerDef | None = None,
        heartbeat: float | None = None,
    ) -> Subscription:
        """A subscription from the head (``after=None``) or after the id ``after``; each
        message made by ``handler`` when one is given; a ``: ping`` comment after each
        ``heartbeat`` seconds without events (keeps proxies from closing an idle stream)."""
        await self._ensure_started()
        subscription = Subscription(
            user,
            filter,
            buffer=self.buffer,
            start=self._position,
            after=after,
            expires_at=expires_at,
            handler=handler,
            heartbeat=heartbeat,
        )
        subscription.start_timers(asyncio.get_running_loop())
        self._subscriptions.add(subscription)
        return subscription

    def close_subscriptions(self) -> None:
        """End every stream (the clients reconnect and resume): at shutdown, and to move
        clients to another process. Any thread may call it."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._close_all()
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._close_all)

    def _close_all(self) -> None:
        for subscription in list(self._subscriptions):
            subscription.close()

    async def stop(self) -> None:
        """End every stream and the reader (on the server's loop)."""
        self._close_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def messages(self, subscription: Subscription) -> AsyncGenerator[bytes, None]:
        """What the client is sent: the events it missed, then live ones, until it
        overflows, its token expires or the stream is closed."""
        try:
            yield sse.retry_message()
            async for message in self._catch_up(subscription):
                yield message
            if subscription.last_id < subscription.start:
                # Closed while catching up: the live events queued meanwhile come after ids
                # the client has not been sent, and sending them would move its resume point
                # past those. It resumes from the last id of the catch-up instead.
                return
            while True:
                if subscription.revoked:
                    yield sse.control_message(
                        "reauth", {"lastEventId": subscription.last_id, "reason": "token_revoked"}
                    )
                    return
                if subscription.overflowed:
                    yield sse.control_message("overflow", {"lastEventId": subscription.last_id})
                    return
                if subscription.queue:
                    # What waits goes out in one write: a client that fell a little behind
                    # catches up in one send, not one per event.
                    chunk = bytearray()
                    while subscription.queue and len(chunk) < COALESCE_BYTES:
                        event_id, message = subscription.queue.popleft()
                        chunk += message
                    subscription.last_id = event_id
                    subscription.sent_at = time.monotonic()
                    yield bytes(chunk)
                    continue
                if subscription.expired or _expired(subscription):
                    yield sse.control_message("reauth", {"lastEventId": subscription.last_id})
                    return
                if subscription.closed:
                    return
                if subscription.beat:
                    subscription.beat = False
                    yield sse.HEARTBEAT
                    continue
                await subscription.wait()
        finally:
            subscription.stop_timers()
            self._subscriptions.discard(subscription)

    async def _catch_up(self, subscription: Subscription) -> AsyncIterator[bytes]:
        """The settled events after the client's id up to where live delivery starts."""
        types = subscription.filter.types_among(self._reader.types)
        scanned = subscription.last_id
        while scanned < subscription.start:
            if subscription.closed:
                return
            # An operator of the operator tenant catches up on every tenant's job events
            # (``visible`` keeps the rest to its own tenant).
            every = self._access.sees_every_tenant(subscription.user)
            items = await asyncio.to_thread(
                self._reader.read_range,
                None if every else subscription.user.tenant_id,
                scanned,
                subscription.start,
                types,
                CATCH_UP_PAGE,
            )
            if not items:
                break
            for item in items:
                message = self._render(subscription, item)
                if message is not None:
                    subscription.last_id = item.id
                    yield sse.event_message(item.id, message)
            scanned = items[-1].id
        # Caught up: nothing the client may see lies between its last id and the start.
        subscription.last_id = max(subscription.last_id, subscription.start)

    def _render(self, subscription: Subscription, item: FeedItem) -> bytes | None:
        """What ``subscription`` is sent for ``item``; ``None``: nothing (not asked for, not
        visible to its user, or its stream handler made nothing of it)."""
        event, user = item.event, subscription.user
        if not subscription.filter.matches(event.type, event.stream_id):
            return None
        if not self._access.visible(item, user):
            return None
        handler = subscription.handler
        if handler is None:
            return self._access.message(item, user)
        try:
            made = handler.func(self._access.shown(item, user), subscription.context)
        except Exception:
            # One handler's failure on one event costs that message, not the feed.
            log.warning("stream handler %s failed on event %d", handler.qn, event.id, exc_info=True)
            return None
        return None if made is None else pydantic_core.to_json(made, serialize_unknown=True)

    async def _ensure_started(self) -> None:
        async with self._starting:
            if self._task is not None and not self._task.done():
                return
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._position = await asyncio.to_thread(self._reader.start)
            self._task = asyncio.create_task(self._run(), name="asanoha-feed")

    async def _run(self) -> None:
        assert self._wake is not None
        wake = self._wake
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self.poll_interval)
            wake.clear()
            more = True
            while more:
                try:
                    batch = await asyncio.to_thread(self._reader.read)
                except Exception:
                    # The database is away for a moment: the next wake-up reads again, from
                    # the same cursor, so nothing is lost.
                    log.warning("the feed could not read the event log", exc_info=True)
                    break
                self.reads += 1
                more = batch.more
                items: list[FeedItem] = []
                if self._subscriptions and batch.events:
                    # Prepared once for every client; not at all when nobody listens.
                    try:
                        items = await asyncio.to_thread(self._reader.prepare_batch, batch.events)
                    except Exception:
                        # The cursor has moved past these events: the clients reconnect and
                        # catch up on them from the log.
                        log.warning("the feed could not prepare events", exc_info=True)
                        self._close_all()
                # No await between the fan-out and the position: a client that subscribes
                # sees both or neither.
                self._fan_out(items)
                self._position = batch.watermark
            await self._end_revoked()

    async def _end_revoked(self) -> None:
        """End the streams whose tokens were revoked, every ``REVOCATION_CHECK_SECONDS``."""
        revoked = self._revoked
        now = time.monotonic()
        if revoked is None or now - self._revocations_checked < REVOCATION_CHECK_SECONDS:
            return
        self._revocations_checked = now
        subscriptions = list(self._subscriptions)
        if not subscriptions:
            return
        try:
            # In a thread: the verifier re-reads the revocations now and then.
            ended = await asyncio.to_thread(
                lambda: [each for each in subscriptions if revoked(each.user)]
            )
        except Exception:
            log.warning("the feed could not check its clients' tokens", exc_info=True)
            return
        for subscription in ended:
            subscription.revoke()

    def _fan_out(self, items: Sequence[FeedItem]) -> None:
        if not items:
            return
        # Rendered once per view, on first need: the access checks, the JSON and the SSE
        # framing of an event are the same bytes for every subscription of one view.
        rendered: dict[Hashable, list[tuple[int, bytes]]] = {}
        for subscription in list(self._subscriptions):
            if subscription.overflowed or subscription.closed:
                continue
            messages = rendered.get(subscription.view)
            if messages is None:
                messages = rendered[subscription.view] = self._render_all(subscription, items)
            subscription.offer(messages)

    def _render_all(
        self, subscription: Subscription, items: Sequence[FeedItem]
    ) -> list[tuple[int, bytes]]:
        """The wire messages of ``items`` for the view of ``subscription``."""
        messages: list[tuple[int, bytes]] = []
        for item in items:
            message = self._render(subscription, item)
            if message is not None:
                messages.append((item.id, sse.event_message(item.id, message)))
        return messages


def _expired(subscription: Subscription) -> bool:
    return subscription.expires_at is not None and time.time() >= subscription.expires_at
