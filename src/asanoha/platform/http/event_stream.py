"""The feed's Server-Sent Events response: each chunk the hub yields is one write.

The hub writes the wire format itself (``platform/feed/sse.py``: ``retry:``, ``id:``, the
``overflow`` and ``reauth`` messages, heartbeat comments), so the response only has to pass
its chunks on, end the stream when the client leaves, and end it when the server is told to
stop. It does no more per message than one ``send``: a general SSE response (a lock and a
timeout scope per send, a task for pings and one for the shutdown signal per connection) cost
as much CPU per delivered message as the hub and the socket together, on every connection.

The server's stop: uvicorn waits for open responses to finish before it stops, and a stream
never finishes by itself. One watcher per event loop notices the stop, as sse-starlette
does (its patch of uvicorn's signal handler sets ``AppStatus.should_exit``; without the
patch, uvicorn's own flag on the handler's server), and closes every open stream of that
loop: each sends what it has queued and ends; its client reconnects elsewhere and resumes.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncGenerator, Callable

import anyio
from sse_starlette.sse import AppStatus
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: Seconds between two looks at the server's stop flag.
EXIT_POLL_SECONDS = 0.5
#: No cache keeps a copy, no proxy buffers the stream.
STREAM_HEADERS = {
    "Cache-Control": "no-store",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


class EventStreamResponse(Response):
    """``text/event-stream`` of ``messages``; ``close`` ends them (the server stops)."""

    media_type = "text/event-stream"

    def __init__(self, messages: AsyncGenerator[bytes, None], *, close: Callable[[], None]) -> None:
        self.messages = messages
        self.close = close
        self.status_code = 200
        self.background = None
        self.init_headers(STREAM_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if scope.get("method") == "HEAD":
            await self.messages.aclose()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        stops = _stops_of(asyncio.get_running_loop())
        stops.add(self.close)
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    async for chunk in self.messages:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                # The client left: nothing more is sent (uvicorn drops what it is given).
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()
        finally:
            stops.discard(self.close)
            # Cancelled while a chunk was being sent, the messages are suspended at a yield:
            # close them here, so that the hub forgets the subscription now.
            with anyio.CancelScope(shield=True):
                await self.messages.aclose()


class _Stops:
    """The streams open on one event loop, and the watcher that closes them at the stop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.closes: set[Callable[[], None]] = set()
        self.watcher = loop.create_task(self._watch(loop), name="asanoha-stream-stop")

    def add(self, close: Callable[[], None]) -> None:
        self.closes.add(close)
        if _server_stopping():
            close()

    def discard(self, close: Callable[[], None]) -> None:
        self.closes.discard(close)

    async def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while not _server_stopping():
                await asyncio.sleep(EXIT_POLL_SECONDS)
            for close in list(self.closes):
                close()
        finally:
            # Stopped, or its loop is closing: the loop's next stream starts a new watcher.
            _STOPS.pop(loop, None)


#: One per event loop that serves streams (servers in threads each run their own).
_STOPS: dict[asyncio.AbstractEventLoop, _Stops] = {}


def _stops_of(loop: asyncio.AbstractEventLoop) -> _Stops:
    stops = _STOPS.get(loop)
    if stops is None:
        stops = _STOPS[loop] = _Stops(loop)
    return stops


def _server_stopping() -> bool:
    """Whether the server was told to stop (SIGTERM, SIGINT)."""
    if AppStatus.should_exit:
        return True
    # When sse-starlette's patch of uvicorn's handler did not take: uvicorn's own flag on
    # the server whose handler is installed (a server in a thread installs none).
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return bool(getattr(server, "should_exit", False))


__all__ = ["EventStreamResponse"]
