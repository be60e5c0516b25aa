"""A minimal Server-Sent Events client over httpx for the feed suite: it keeps the raw bytes
(what was on the wire) and the parsed messages."""

from __future__ import annotations

import contextlib
import json
import socket
import time
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

    def read_until(self, done: Callable[[SseStream], bool], within: float = 120) -> SseStream:
        """Read until ``done(self)``; ``AssertionError`` when the stream ends first, or when
        ``within`` seconds pass (heartbeats keep the socket busy, so its read never times
        out: a condition that never comes true must still end the test)."""
        if self._chunks is None:
            self._chunks = self.response.iter_raw()
        deadline = time.monotonic() + within
        while not done(self):
            assert time.monotonic() < deadline, (
                f"not done within {within} s, after {len(self.messages)} messages"
            )
            chunk = next(self._chunks, None)
            assert chunk is not None, (
                f"the stream ended before it was done, after {len(self.messages)} messages"
            )
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


class SocketStream:
    """A stream read from a plain socket, for a client that stops reading: its receive buffer
    is tiny while it does not read (what it does not take stays with the server), and is
    widened once it reads again (a tiny window makes every segment wait for an ACK)."""

    def __init__(self, base_url: str, token: str) -> None:
        host, port = base_url.removeprefix("http://").split(":")
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket.settimeout(60)
        self.socket.connect((host, int(port)))
        self.socket.sendall(
            f"GET /api/stream?access_token={token} HTTP/1.1\r\nHost: {host}\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n\r\n".encode()
        )
        self.stream = SseStream(response=None)  # type: ignore[arg-type]
        self._body = b""
        self._head_done = False

    def read_until(self, done: Callable[[SseStream], bool]) -> SseStream:
        """Read (with a wide receive buffer) until ``done`` or the server closes."""
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        while not done(self.stream):
            data = self.socket.recv(1 << 20)
            if not data:
                break
            self._take(data)
        return self.stream

    def close(self) -> None:
        self.socket.close()

    def _take(self, data: bytes) -> None:
        self._body += data
        if not self._head_done:
            if b"\r\n\r\n" not in self._body:
                return
            _, self._body = self._body.split(b"\r\n\r\n", 1)
            self._head_done = True
        # Chunked transfer coding: <hex size>\r\n<data>\r\n ...
        while b"\r\n" in self._body:
            size_line, rest = self._body.split(b"\r\n", 1)
            size = int(size_line, 16)
            if len(rest) < size + 2:
                return
            self.stream.feed(rest[:size])
            self._body = rest[size + 2 :]


@contextlib.contextmanager
def open_stream(
    base_url: str,
    token: str,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    path: str = "/api/stream",
) -> Iterator[SseStream]:
    """``GET /api/stream`` (or ``path``) with ``token`` (as ``access_token``, as a browser
    sends it)."""
    query = {"access_token": token, **(params or {})}
    with (
        httpx.Client(base_url=base_url, timeout=timeout) as client,
        client.stream("GET", path, params=query, headers=headers) as response,
    ):
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield SseStream(response)
