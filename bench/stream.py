"""The live feed: latency from commit to a client's receipt with 1, 100 and 1,000 connected
clients, the API process's CPU per delivered message, and writes per second with 1,000
clients connected against none.

    .venv/bin/python bench/stream.py [--clients 1 100 1000] [--writes 50] [--json PATH]
    .venv/bin/python bench/stream.py --quick

One API process (uvicorn in a thread, on a fresh Postgres database) serves ``/api/stream``;
the clients run in a process of their own (plain asyncio sockets, one per client), so their
parsing does not share the API process's interpreter. The writes run in the API process
(``dispatch_write``, as an HTTP write would) and its commit listener notes each commit's
time; a client notes when each event's ``id:`` line arrives. Both clocks are the machine's
monotonic clock. Latency is measured on writes spaced apart (one at a time); throughput on
writes back to back from 4 threads for a few seconds. Targets: p99 <= 100 ms at 1,000
clients; writes/s with 1,000 clients >= 0.9 x with none.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import secrets
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    bench_feature,
    describe_setup,
    note_payload,
    scratch_database,
)
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import App, Settings
from asanoha.platform.feed import FeedHub
from asanoha.platform.http import issue_token
from asanoha.platform.http.stream import feed_of
from asanoha.platform.store import StoredEvent
from asanoha.testing.serving import serve_in_thread

P99_TARGET_MS = 100.0
THROUGHPUT_TARGET = 0.9
WRITER_THREADS = 4


# -- the clients' process -------------------------------------------------------------------


async def follow(
    host: str, port: int, path: str, seen: list[tuple[int, float]], opened: asyncio.Queue[int]
) -> None:
    """One client: a raw HTTP/1.1 stream; notes (event id, arrival) of each ``id:`` line."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    told = False
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            if not told and line.startswith(b"retry:"):
                told = True
                opened.put_nowait(1)
            elif line.startswith(b"id: "):
                seen.append((int(line[4:]), time.perf_counter()))
    finally:
        writer.close()


def clients_main(
    base_url: str, token: str, count: int, ready: Any, stop: Any, results: Any
) -> None:
    """The clients' process: ``count`` streams; reports ready, then the arrivals at stop."""
    host, port = base_url.removeprefix("http://").split(":")
    path = f"/api/stream?access_token={token}"
    # This process notes when each event arrives: a pause of its own collector (a full
    # collection over 1,000 streams and the growing arrivals, 100-150 ms, once or twice a
    # run) would be counted as the server's latency for every event in flight, and one such
    # write is the whole p99 of 50. Nothing here makes reference cycles to collect.
    gc.disable()

    async def main() -> None:
        opened: asyncio.Queue[int] = asyncio.Queue()
        seen: list[list[tuple[int, float]]] = [[] for _ in range(count)]
        tasks = []
        for index in range(count):
            tasks.append(asyncio.create_task(follow(host, int(port), path, seen[index], opened)))
            if index % 100 == 99:
                await asyncio.sleep(0)
        for _ in range(count):
            await opened.get()
        ready.set()
        # The server ends every stream (after what it queued) when the run is over.
        await asyncio.gather(*tasks, return_exceptions=True)
        results.put([item for one in seen for item in one])

    asyncio.run(main())


# -- the API process ------------------------------------------------------------------------


class Commits:
    """When each event committed (the service's commit listener)."""

    def __init__(self) -> None:
        self.at: dict[int, float] = {}

    def __call__(self, events: Sequence[StoredEvent]) -> None:
        now = time.perf_counter()
        for event in events:
            self.at[event.id] = now


class Connected:
    """``count`` clients in their own process, connected to ``base_url``."""

    def __init__(self, base_url: str, token: str, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.ready = context.Event()
        self.stop = context.Event()
        self.results = context.Queue()
        self.process = context.Process(
            target=clients_main,
            args=(base_url, token, count, self.ready, self.stop, self.results),
            daemon=True,
        )

    def __enter__(self) -> Connected:
        self.process.start()
        if not self.ready.wait(120):
            raise RuntimeError("the clients did not connect in time")
        return self

    def arrivals(self, feed: FeedHub, last_id: int) -> list[tuple[int, float]]:
        """Once the feed handed out ``last_id``: end the streams, collect the arrivals."""
        while feed.position < last_id:
            time.sleep(0.01)
        # The batch that reached ``last_id`` is being fanned out on the server's loop.
        time.sleep(0.5)
        feed.close_subscriptions()
        found: list[tuple[int, float]] = self.results.get(timeout=120)
        return found

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()


def latency(
    app: App,
    api: Any,
    commits: Commits,
    base_url: str,
    token: str,
    clients: int,
    writes: int,
    spacing: float,
) -> dict[str, float]:
    """Latency percentiles (ms) and API-process CPU per delivered message (ms)."""
    rss_before = resident_kb()
    with Connected(base_url, token, clients) as connected:
        # The clients are connected: what the API process holds for them.
        per_client_kb = (resident_kb() - rss_before) / clients
        cpu_before = time.process_time()
        for n in range(writes):
            app.service.dispatch_write(CREATE_QN, note_payload(n), USER)
            time.sleep(spacing)
        cpu = time.process_time() - cpu_before
        received = connected.arrivals(feed_of(api), max(commits.at))
        arrivals = [(event_id, at) for event_id, at in received if event_id in commits.at]
    delays = sorted((at - commits.at[event_id]) * 1000 for event_id, at in arrivals)
    commits.at.clear()
    expected = clients * writes
    if len(delays) < expected:
        print(f"  ({len(delays)} of {expected} deliveries arrived)")
    quantiles = statistics.quantiles(delays, n=100) if len(delays) > 1 else delays * 99
    return {
        "p50": statistics.median(delays),
        "p99": quantiles[98],
        "cpu_per_message_ms": cpu * 1000 / max(1, len(delays)),
        "delivered": float(len(delays)),
        "kib_per_client": per_client_kb,
    }


def resident_kb() -> float:
    """This process's resident memory (Linux), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    return 0.0


def throughput(app: App, seconds: float) -> float:
    """Writes per second from ``WRITER_THREADS`` threads back to back."""
    stop = time.perf_counter() + seconds
    counts = [0] * WRITER_THREADS

    def write(index: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            app.service.dispatch_write(CREATE_QN, note_payload(n), USER)
            n += 1
        counts[index] = n

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITER_THREADS)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - began)


def run(args: argparse.Namespace) -> list[Figure]:
    figures: list[Figure] = []
    with scratch_database(args.database_url, "asanoha_bench_stream") as url:
        settings = Settings(
            database_url=url, jwt_secret=secrets.token_hex(32), database_pool_size=20
        )
        app = App([bench_feature()], settings)
        commits = Commits()
        app.service.add_commit_listener(commits)
        try:
            app.create_schema()
            api = app.build_http()
            token = issue_token(settings, USER)
            with serve_in_thread(api) as base_url:
                feed = feed_of(api)
                results: dict[int, dict[str, float]] = {}
                for clients in args.clients:
                    found = latency(
                        app, api, commits, base_url, token, clients, args.writes, args.spacing
                    )
                    results[clients] = found
                    print(
                        f"{clients:5d} clients: commit -> receipt p50 {found['p50']:7.1f} ms"
                        f"  p99 {found['p99']:7.1f} ms  API CPU per delivered message "
                        f"{found['cpu_per_message_ms']:.3f} ms, memory per connection "
                        f"{found['kib_per_client']:.1f} KiB"
                    )
                alone = throughput(app, args.seconds)
                most = max(args.clients)
                with Connected(base_url, token, most) as connected:
                    crowded = throughput(app, args.seconds)
                    with app.database.connect() as conn:
                        head = conn.execute(text("SELECT max(id) FROM asanoha_events")).scalar_one()
                    connected.arrivals(feed, int(head))
                ratio = safe_ratio(crowded, alone)
                print(f"writes/s, no client connected         {alone:8.0f}")
                print(f"writes/s, {most:5d} clients connected    {crowded:8.0f}")
                print(
                    f"ratio                                 {ratio or 0:8.2f}   "
                    f"(target >= {THROUGHPUT_TARGET})"
                )
        finally:
            app.close()
    for clients, found in results.items():
        figures.append(
            Figure(
                "stream.py",
                f"commit -> receipt p99, {clients} clients",
                found["p99"],
                "ms",
                peer="p50",
                peer_value=found["p50"],
                ratio_label="p99 / p50",
                ratio=safe_ratio(found["p99"], found["p50"]),
                target=f"<= {P99_TARGET_MS:g} ms" if clients >= 1000 else "",
                target_met=found["p99"] <= P99_TARGET_MS if clients >= 1000 else None,
                note=f"CPU per delivered message {found['cpu_per_message_ms']:.3f} ms",
            )
        )
    figures.append(
        Figure(
            "stream.py",
            f"writes/s with {most} clients connected",
            crowded,
            "writes/s",
            peer="no client",
            peer_value=alone,
            ratio_label="with / without",
            ratio=ratio,
            target=f">= {THROUGHPUT_TARGET}",
            target_met=at_least(ratio, THROUGHPUT_TARGET),
        )
    )
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--writes", type=int, default=50, help="spaced writes per client count")
    parser.add_argument("--spacing", type=float, default=0.05, help="seconds between them")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput phase")
    parser.add_argument("--database-url", default=ADMIN_URL)
    parser.add_argument("--quick", action="store_true", help="1 and 5 clients, 5 writes")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.writes, args.seconds = [1, 5], 5, 0.5
    print(describe_setup(args.database_url), f"(pid {os.getpid()})")
    write_figures(args.json, run(args))


if __name__ == "__main__":
    main()
