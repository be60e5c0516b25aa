"""The listener of ``serve --workers N``: its connections are TCP, so asyncio sets NODELAY."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from asanoha.cli.api_workers import tcp_listener


def test_connections_accepted_by_the_worker_listener_have_nagle_turned_off() -> None:
    config = uvicorn.Config("unused:app", host="127.0.0.1", port=0, workers=2)
    listener = tcp_listener(config)
    seen: list[int] = []

    async def accept_one() -> None:
        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            seen.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    try:
        asyncio.run(accept_one())
    finally:
        listener.close()
    assert listener.proto == socket.IPPROTO_TCP
    assert seen and seen[0] != 0
