"""Partitioned consumers over a fleet: a consumer whose handler writes a row per event
catches up on a backlog at 1, 2 and 4 partitions, delivered by two ``asanoha worker``
processes (concurrency 1 each).

    .venv/bin/python bench/partitioned_consumer.py [--events 20000] [--partitions 1 2 4]

For each count a fresh database gets the backlog (``--events`` events over 5,000 streams,
each with its partition key as ``append_event`` computes it) while the consumer is
disabled; both workers start, and the clock runs from enabling the consumer (and waking each
of its partitions) until every event has its row. ``--rounds`` alternates the counts and keeps
each one's best. The target: at least 1.6x the rate of one partition at 4 on a 2-core
machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import sys
import time
import uuid
from pathlib import Path

import psycopg

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _fleet_probe import busy_share, cpu_seconds, cpu_ticks, postgres_processes, spent
from _partitioned_app import CONSUMER, EVENT_TYPE, partitioned_feature
from _processes import descendants, started, wait_for_output
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import App, Settings
from asanoha.platform.store.events import partition_key

BENCH_DIR = Path(__file__).resolve().parent
BROKER_URL = "redis://127.0.0.1:6379/0"
STREAMS = 5000
TARGET = 1.6
TENANT = "bench-tenant"


def fill(url: str, events: int) -> None:
    """``events`` events of the consumer's type, round-robin over ``STREAMS`` streams."""
    now = dt.datetime.now(dt.UTC)
    columns = (
        "stream_id, stream_type, tenant_id, version, type, schema_version, payload, metadata, "
        "created_at, created_by, partition_key"
    )
    statement = f"COPY asanoha_events ({columns}) FROM STDIN"
    with (
        psycopg.connect(conninfo(url)) as conn,
        conn.cursor() as cursor,
        cursor.copy(statement) as copy,
    ):
        for n in range(events):
            stream = f"stream-{n % STREAMS}"
            copy.write_row(
                (
                    stream,
                    "parted",
                    TENANT,
                    n // STREAMS + 1,
                    EVENT_TYPE,
                    1,
                    json.dumps({"n": n}),
                    json.dumps({"tenant_id": TENANT}),
                    now,
                    "bench",
                    partition_key(TENANT, stream),
                )
            )


def copies(url: str) -> int:
    with psycopg.connect(conninfo(url)) as conn:
        found = conn.execute("SELECT count(*) FROM parted_copies").fetchone()
    return int(found[0]) if found else 0


def run(partitions: int, args: argparse.Namespace) -> tuple[float, str]:
    """Events per second at ``partitions``, and how many each worker process delivered."""
    with scratch_database(args.database_url, "asanoha_bench_partitions") as url:
        prefix = f"benchpart{uuid.uuid4().hex[:8]}"
        settings = Settings(
            database_url=url,
            broker_url=args.broker_url,
            queue_prefix=prefix,
            consumer_wake=False,
            jwt_secret=secrets.token_hex(32),
        )
        app = App([partitioned_feature(partitions)], settings)
        try:
            app.create_schema()
            app.consumers.disable(CONSUMER)
            fill(url, args.events)
            env = {
                "ASANOHA_DATABASE_URL": url,
                "ASANOHA_BROKER_URL": args.broker_url,
                "ASANOHA_QUEUE_PREFIX": prefix,
                "ASANOHA_CONSUMER_WAKE": "false",
                "ASANOHA_JWT_SECRET": settings.jwt_secret,
                "BENCH_PARTITIONS": str(partitions),
                "PYTHONPATH": str(BENCH_DIR),
            }
            command = [sys.executable, "-m", "asanoha.cli", "worker", "--app"]
            command += ["_partitioned_app:app", "--concurrency", "1", "--loglevel", "INFO"]
            with (
                started(command, env=env, cwd=str(BENCH_DIR)) as first,
                started(command, env=env, cwd=str(BENCH_DIR)) as second,
            ):
                for worker in (first, second):
                    wait_for_output(worker, "ready", timeout=120)
                database = url.rsplit("/", 1)[1]
                ours = [first.pid, *descendants(first.pid), second.pid, *descendants(second.pid)]
                workers_before = cpu_seconds(ours)
                server_before = cpu_seconds(postgres_processes(database)[0])
                began = time.perf_counter()
                busy_before = cpu_ticks()
                app.consumers.enable(CONSUMER)
                app.celery_jobs.request_consumer_wakes()
                deadline = time.monotonic() + args.timeout
                while copies(url) < args.events:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{copies(url)} of {args.events} within the timeout")
                    time.sleep(0.02)
                seconds = time.perf_counter() - began
                busy = busy_share(busy_before, cpu_ticks())
                workers = spent(workers_before, cpu_seconds(ours))
                server = spent(server_before, cpu_seconds(postgres_processes(database)[0]))
        finally:
            app.close()
        per_event = (workers + server) / args.events * 1000
        return args.events / seconds, (
            f"{seconds:.1f} s, CPUs {busy:.0%} busy; CPU per event {per_event:.2f} ms: "
            f"workers {workers / args.events * 1000:.2f}, Postgres {server / args.events * 1000:.2f}"
        )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--database-url", default=ADMIN_URL)
    parser.add_argument("--broker-url", default=BROKER_URL)
    parser.add_argument("--json", help="write the figures here (for run_all.py)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    print(describe_setup(args.database_url))
    rates: dict[int, float] = {}
    loads: list[float] = []
    # Rounds alternate the counts, so that a change in the machine's load hits them alike;
    # each count's best round is kept.
    for _ in range(args.rounds):
        for partitions in args.partitions:
            rate, took = run(partitions, args)
            rates[partitions] = max(rate, rates.get(partitions, 0.0))
            loads.append(os.getloadavg()[0])
            print(
                f"{partitions} partition(s): {rate:,.0f} events/s ({args.events} events in "
                f"{took}; load average {loads[-1]:.1f})"
            )
    base = rates.get(1)
    note = (
        f"load average during the runs {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs"
    )
    figures = []
    for partitions, rate in rates.items():
        ratio = safe_ratio(rate, base)
        figures.append(
            Figure(
                benchmark="partitioned_consumer",
                name=f"consumer writing a row per event, {partitions} partition(s), 2 workers",
                value=rate,
                unit="events/s",
                peer="1 partition, same workers",
                peer_value=base,
                ratio_label="N / 1",
                ratio=ratio,
                target=f">= {TARGET}" if partitions == 4 else "(curve)",
                target_met=at_least(ratio, TARGET) if partitions == 4 else None,
                note=note,
            )
        )
    curve = ", ".join(f"{p}: {safe_ratio(r, base) or 0:.2f}x" for p, r in rates.items())
    print(f"scaling against 1 partition: {curve}")
    write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
