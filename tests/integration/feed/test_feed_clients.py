"""Many clients on one process, and a slow one: a client that does not read is dropped with
``event: overflow`` naming its last id, while the others get everything; one process serves
a few hundred clients from one reader."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.sse_client import SocketStream, open_stream

ADMIN = TestUsers.admin
#: Messages a client may have waiting in this suite.
BUFFER = 4
#: Characters of each ticket's body: the writes add up to more than the kernel's and the
#: server's socket buffers hold, so a client that does not read blocks its stream.
BODY = 100_000
WRITES = 60
#: Clients of the many-clients test (the bench measures 1,000).
CLIENTS = 200


@pytest.fixture
def small_buffer(asanoha_stack: Callable[..., Any]) -> Iterator[Served]:
    stack: Stack = asanoha_stack(features=[_crm()], settings={"stream_buffer": BUFFER})
    yield from serve(stack)


def _crm() -> Any:
    from tests.integration.feed.features import crm

    return crm


def test_a_client_that_does_not_read_overflows_and_the_others_get_everything(
    small_buffer: Served,
) -> None:
    served = small_buffer
    stack = served.stack
    token = served.token(ADMIN)
    slow_client = SocketStream(served.base_url, token)
    try:
        with open_stream(served.base_url, token) as fast:
            fast.read_until(lambda s: b"retry:" in s.raw)
            # The fast client reads all along, beside the writes.
            reader = threading.Thread(
                target=fast.read_until, args=(lambda s: len(s.events) == WRITES,)
            )
            reader.start()
            written = [
                stack.http.write_ok(
                    "crm:write:ticket:create", {"title": f"t{i}", "body": "x" * BODY}, ADMIN
                )["id"]
                for i in range(WRITES)
            ]
            reader.join()
        # The fast client has every event: every batch was offered to the slow one too.
        slow = slow_client.read_until(lambda s: any(m.event == "overflow" for m in s.messages))
    finally:
        slow_client.close()
    assert [m.json["streamId"] for m in fast.events] == written
    assert not any(m.event == "overflow" for m in fast.messages)
    overflow = next(m for m in slow.messages if m.event == "overflow")
    assert slow.messages[-1] is overflow
    received = slow.ids
    assert len(received) < WRITES
    assert overflow.json["lastEventId"] == (received[-1] if received else fast.ids[0] - 1)
    # Resuming from the id the overflow named gives the rest, nothing twice.
    with open_stream(
        served.base_url, token, headers={"Last-Event-ID": str(overflow.json["lastEventId"])}
    ) as resumed:
        resumed.read_until(lambda s: len(s.events) == WRITES - len(received))
    assert received + resumed.ids == fast.ids


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_one_process_serves_many_clients_from_one_reader(stack: Stack, served: Served) -> None:
    token = served.token(ADMIN)
    url = f"{served.base_url}/api/stream"

    async def follow(
        client: httpx.AsyncClient, started: list[int], all_open: asyncio.Event
    ) -> bytes:
        """Open a stream, count it as open at its first bytes, return once an event came."""
        async with client.stream("GET", url, params={"access_token": token}) as response:
            seen = b""
            async for chunk in response.aiter_raw():
                if not seen:
                    started.append(1)
                    if len(started) == CLIENTS:
                        all_open.set()
                seen += chunk
                if b"data: " in seen:
                    break
            return seen

    async def run() -> tuple[list[bytes], int]:
        limits = httpx.Limits(max_connections=CLIENTS + 10)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            all_open = asyncio.Event()
            started: list[int] = []
            tasks = [asyncio.create_task(follow(client, started, all_open)) for _ in range(CLIENTS)]
            await all_open.wait()
            connected = len(served.feed.subscriptions)
            row = await asyncio.to_thread(
                stack.http.write_ok, "crm:write:ticket:create", {"title": "for all"}, ADMIN
            )
            row_ids.append(str(row["id"]).encode())
            results = await asyncio.gather(*tasks)
            return results, connected

    row_ids: list[bytes] = []
    results, connected = asyncio.run(run())
    row_id = row_ids[0]
    assert connected == CLIENTS
    assert len(results) == CLIENTS
    assert all(row_id in result for result in results)
