"""Drain probe on a shared Redis: the cost of one probe pass with 20,000 foreign entries in
Redis's ``unacked`` hash against the same pass with an empty hash.

The ``unacked`` hash is shared by every application on the Redis database (each worker's
messages taken and not yet acknowledged). A probe pass must cost the same whatever other
applications hold there. For reference, the time one read of the whole hash takes (HVALS
and decoding every entry, what a pass once did) is printed too.

    .venv/bin/python bench/drain_probe.py [--foreign 20000] [--passes 200] [--json PATH]

Runs on a private ``redis-server`` on a free port (never on the shared one), stopped at the
end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from celery import Celery

from _results import Figure, at_most, safe_ratio, write_figures
from asanoha.workers.outcomes import JobOutcomes
from asanoha.workers.pending import make_probe

QUEUES = ("asanoha-bench-probe.worker", "asanoha-bench-probe.api")
TARGET = 1.5


@contextmanager
def private_redis() -> Iterator[str]:
    """A ``redis-server`` of its own on a free port; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="asanoha-bench-redis-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", folder,
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def pass_cost(url: str, passes: int) -> float:
    """Median seconds of one probe pass over the lane queues."""
    celery = Celery("bench-probe", broker=url)
    probe = make_probe(celery, JobOutcomes(celery))
    try:
        probe.count(QUEUES)
        times = []
        for _ in range(passes):
            started = time.perf_counter()
            probe.count(QUEUES)
            times.append(time.perf_counter() - started)
        return statistics.median(times)
    finally:
        probe.close()


def hash_read_cost(client: redis.Redis, passes: int) -> float:
    """Median seconds of reading and decoding the whole ``unacked`` hash."""
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        for raw in client.hvals("unacked"):
            json.loads(raw)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--foreign", type=int, default=20_000, help="foreign unacked entries")
    parser.add_argument("--passes", type=int, default=200, help="probe passes per figure")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    with private_redis() as url:
        client = redis.Redis.from_url(url)
        empty = pass_cost(url, args.passes)
        entry = json.dumps([{"body": "x" * 200}, "other", "other-app.worker"])
        with client.pipeline(transaction=False) as pipe:
            for start in range(0, args.foreign, 1000):
                pipe.hset(
                    "unacked",
                    mapping={
                        f"foreign-{n}": entry for n in range(start, min(start + 1000, args.foreign))
                    },
                )
            pipe.execute()
        crowded = pass_cost(url, args.passes)
        reference = hash_read_cost(client, max(1, args.passes // 20))
        client.close()
    ratio = safe_ratio(crowded, empty)
    print(f"probe pass, empty unacked hash          {empty * 1000:8.3f} ms median")
    print(f"probe pass, {args.foreign:,} foreign entries     {crowded * 1000:8.3f} ms median")
    print(f"ratio                                   {ratio or 0:8.2f}   (target <= {TARGET})")
    print(f"reference: one read of the whole hash   {reference * 1000:8.3f} ms median")
    write_figures(
        args.json,
        [
            Figure(
                "drain_probe.py",
                f"probe pass, {args.foreign:,} foreign unacked entries",
                crowded * 1000,
                "ms",
                peer="same pass, empty hash",
                peer_value=empty * 1000,
                ratio_label="crowded / empty",
                ratio=ratio,
                target=f"<= {TARGET}",
                target_met=at_most(ratio, TARGET),
                note=f"reading the whole hash once: {reference * 1000:.1f} ms",
            )
        ],
    )


if __name__ == "__main__":
    main()
