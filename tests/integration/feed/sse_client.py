"""A minimal Server-Sent Events client over httpx for the feed suite: it keeps the raw bytes
(what was on the wire) and the parsed messages."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Message:
    """One SSE message: its ``event`` name (``message`` when none), ``id`` and ``data``."""

    event: str
    id: str | None
    data: str

    @property
    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class SseStream:
    """The client side of one stream."""

    response: httpx.Response
    raw: bytearray = field(default_factory=bytearray)
    messages: list[Message] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    _pending: str = ""
    _chunks: Iterator[bytes] | None = None

    def read_until(self, done: Callable[[SseStream], bool]) -> SseStream:
        """Read until ``done(self)`` (or the stream ends: then ``AssertionError``)."""
        if self._chunks is None:
            self._chunks = self.response.iter_raw()
        while not done(self):
            chunk = next(self._chunks, None)
            assert chunk is not None, f"the stream ended before it was done: {self.messages}"
            self.feed(chunk)
        return self

    def read_to_end(self) -> SseStream:
        """Read until the server ends the stream."""
        if self._chunks is None:
            self._chunks = self.response.iter_raw()
        for chunk in self._chunks:
            self.feed(chunk)
        return self

    def feed(self, chunk: bytes) -> None:
        self.raw += chunk
        self._pending += chunk.decode()
        while "\n\n" in self._pending:
            block, self._pending = self._pending.split("\n\n", 1)
            self._parse(block)

    def _parse(self, block: str) -> None:
        event, event_id, data = "message", None, []
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "":
                self.comments.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                event_id = value
            elif name == "data":
                data.append(value)
        if data:
            self.messages.append(Message(event, event_id, "\n".join(data)))

    @property
    def events(self) -> list[Message]:
        """The event messages (no control messages)."""
        return [message for message in self.messages if message.event == "message"]

    @property
    def ids(self) -> list[int]:
        return [int(message.id) for message in self.events if message.id is not None]

    def has_id(self, event_id: int) -> bool:
        return event_id in self.ids


@contextlib.contextmanager
def open_stream(
    base_url: str,
    token: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[SseStream]:
    """``GET /api/stream`` with ``token`` (as ``access_token``, as a browser sends it)."""
    query = {"access_token": token, **(params or {})}
    with (
        httpx.Client(base_url=base_url, timeout=timeout) as client,
        client.stream("GET", "/api/stream", params=query, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield SseStream(response)
