"""The feed's SSE response: chunks passed on as they come, the stream ended when the client
leaves (the hub forgets it) and when the server is told to stop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from sse_starlette.sse import AppStatus

from asanoha.platform.http import event_stream
from asanoha.platform.http.event_stream import EventStreamResponse

SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "headers": []}


class Messages:
    """A stand-in for the hub's messages: two chunks, then waits until closed."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.finished = False

    def close(self) -> None:
        self.closed.set()

    async def __call__(self) -> AsyncGenerator[bytes, None]:
        try:
            yield b"retry: 1000\n\n"
            yield b"id: 1\ndata: {}\n\n"
            await self.closed.wait()
        finally:
            self.finished = True


async def serve(messages: Messages, receive: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    response = EventStreamResponse(messages(), close=messages.close)
    # The guard ends a stream that never ends instead of hanging the suite.
    async with asyncio.timeout(60):
        await response(SCOPE, receive, send)
    return sent


def test_each_chunk_is_one_write_and_the_stream_ends_when_the_server_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(event_stream, "EXIT_POLL_SECONDS", 0.01)
    messages = Messages()

    async def receive() -> dict[str, Any]:
        # The client stays; the server is told to stop while the stream is open.
        monkeypatch.setattr(AppStatus, "should_exit", True)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    sent = asyncio.run(serve(messages, receive))
    start, *bodies = sent
    assert start["type"] == "http.response.start"
    headers = dict(start["headers"])
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert headers[b"cache-control"] == b"no-store"
    assert [body["body"] for body in bodies] == [b"retry: 1000\n\n", b"id: 1\ndata: {}\n\n", b""]
    assert [body["more_body"] for body in bodies] == [True, True, False]
    assert messages.finished


def test_a_client_that_leaves_ends_the_messages_at_once() -> None:
    messages = Messages()

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    asyncio.run(serve(messages, receive))
    # The hub's generator ran its ``finally`` (it forgets the subscription there).
    assert messages.finished
    assert not messages.closed.is_set()
