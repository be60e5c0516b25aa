"""Consumer throughput: a no-op consumer catching up on 100,000 events against a raw psycopg
loop reading the same batches; and the write path with a consumer running beside it.

    .venv/bin/python bench/consumer_catchup.py [--events 100000] [--seconds 3]

Part 1 resets the consumer's cursor before each round and times ``app.consumers.run_once()``
until it has caught up; the raw loop reads the same 1,000-event batches (all columns, in id
order, of the consumer's event type) and updates a position row per batch, each batch in its
own transaction. Part 2 runs ``bench/write_path.py``'s asanoha writer with 8 threads, on an
application without consumers, and on one with a consumer of every write's event: its commits
publish coalesced wake-up tasks to Redis, and another process advances the consumer meanwhile
(what a worker does). The database is created for the run and dropped at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from _common import (
    ADMIN_URL,
    FEATURE,
    Throughput,
    bench_feature,
    conninfo,
    describe_setup,
    run_threads,
    scratch_database,
    warm_up_seconds,
)
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import App, Feature, Settings
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.consumers.passes import BATCH_SIZE
from asanoha.platform.store import StoredEvent
from asanoha.workers.consumer_wake import WAKE_INTERVAL
from write_path import asanoha_worker

EVENT_TYPE = f"{FEATURE}:event:note.created"
CONSUMER = "catchup:consumer:count"
BROKER_URL = "redis://127.0.0.1:6379/0"
CATCHUP_RATIO_TARGET = 0.5
CATCHUP_RATE_TARGET = 30_000
WRITE_RATIO_TARGET = 0.9
WRITE_THREADS = 8

FILL = f"""
INSERT INTO asanoha_events (stream_id, stream_type, tenant_id, version, type, schema_version,
                            payload, metadata, created_at, created_by)
SELECT gen_random_uuid()::text, '{FEATURE}:note', 'bench-tenant', 1, '{EVENT_TYPE}', 1,
       jsonb_build_object('data', jsonb_build_object('title', 'note ' || g, 'amount', g)),
       jsonb_build_object('user_id', 'bench-user', 'tenant_id', 'bench-tenant',
                          'handler', '{FEATURE}:write:note:create', 'request_id', md5(g::text)),
       now(), 'bench-user'
FROM generate_series(1, %s) AS g
"""
RAW_READ = " ".join(
    [
        "SELECT",
        "id,",
        "stream_id,",
        "stream_type,",
        "tenant_id,",
        "version,",
        "type,",
        "schema_version,",
        "payload,",
        "metadata,",
        "created_at,",
        "created_by",
        "FROM",
        "asanoha_events",
        "WHERE",
        "id",
        ">",
        "%s",
        "AND",
        "type",
        "=",
        "ANY(%s)",
        "ORDER",
        "BY",
        "id",
        "LIMIT",
        "%s",
    ]
)
RAW_ADVANCE = "UPDATE raw_positions SET position = %s WHERE name = %s"


def main(argv: list[str] | None = None) -> int:
    """Run both parts and print the figures with their targets."""
    args = parse_args(argv)
    with scratch_database(args.database_url, "asanoha_bench_consumer") as url:
        print(f"consumer catch-up, {args.events} events; {describe_setup(url)}")
        asanoha, raw = catch_up(url, args)
        print()
        print(f"write path with a consumer beside it, {WRITE_THREADS} threads, {args.seconds:g} s")
        alone, beside = write_path(url, args)
    print()
    print(f"{'events/s catching up (best round)':<44}{'':>4}")
    print(f"  asanoha consumer (no-op handler)          {asanoha.rate:10.0f}")
    print(f"  raw psycopg loop (same batches)           {raw.rate:10.0f}")
    print(
        f"  asanoha / raw                             {asanoha.rate / raw.rate:10.2f}"
        f"   target >= {CATCHUP_RATIO_TARGET}"
    )
    print(
        f"  asanoha events/s                          {asanoha.rate:10.0f}   target >= {CATCHUP_RATE_TARGET:,}"
    )
    print()
    print("writes/s, asanoha service, 8 threads (best round)")
    print(f"  without consumers                         {alone.rate:10.0f}")
    print(f"  with a consumer advancing beside it       {beside.rate:10.0f}")
    print(
        f"  with / without                            {beside.rate / alone.rate:10.2f}"
        f"   target >= {WRITE_RATIO_TARGET}"
    )
    write_figures(args.json, figures_of(args, asanoha, raw, alone, beside))
    return 0


def figures_of(
    args: argparse.Namespace,
    asanoha: Throughput,
    raw: Throughput,
    alone: Throughput,
    beside: Throughput,
) -> list[Figure]:
    """The catch-up rate against the raw loop, and the writers with a consumer beside them."""
    catchup = safe_ratio(asanoha.rate, raw.rate)
    writes = safe_ratio(beside.rate, alone.rate)
    return [
        Figure(
            benchmark="consumer_catchup",
            name=f"no-op consumer catching up on {args.events:,} events",
            value=round(asanoha.rate),
            unit="events/s",
            peer="raw psycopg loop, same batches, a position update per batch",
            peer_value=round(raw.rate),
            ratio_label="asanoha / raw",
            ratio=catchup,
            target=f">= {CATCHUP_RATIO_TARGET} and >= {CATCHUP_RATE_TARGET:,} events/s",
            target_met=bool(at_least(catchup, CATCHUP_RATIO_TARGET))
            and asanoha.rate >= CATCHUP_RATE_TARGET,
        ),
        Figure(
            benchmark="consumer_catchup",
            name=f"service-layer writes, {WRITE_THREADS} threads, consumer advancing beside",
            value=round(beside.rate),
            unit="writes/s",
            peer="the same writer on an application without consumers",
            peer_value=round(alone.rate),
            ratio_label="with / without",
            ratio=writes,
            target=f">= {WRITE_RATIO_TARGET}",
            target_met=at_least(writes, WRITE_RATIO_TARGET),
        ),
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events to catch up on")
    parser.add_argument("--seconds", type=float, default=3.0, help="per write measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each; best kept")
    parser.add_argument(
        "--database-url", default=ADMIN_URL, help="admin URL to create and drop the bench database"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 10,000 events, 1 s, one round"
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.seconds, args.rounds = 10_000, 1.0, 1
    return args


# -- part 1: catching up --------------------------------------------------------------------


def counting_feature(counter: list[int]) -> Feature:
    """A consumer that only counts what it is given."""
    feature = Feature("catchup")

    @feature.consumer("count", on=[EVENT_TYPE])
    def count(event: StoredEvent, ctx: ConsumerContext) -> None:
        counter[0] += 1

    return feature


def catch_up(url: str, args: argparse.Namespace) -> tuple[Throughput, Throughput]:
    """Best rounds of the asanoha consumer and of the raw loop over the same events."""
    counter = [0]
    app = App(
        [bench_feature(), counting_feature(counter)],
        Settings(database_url=url, consumer_wake=False),
    )
    try:
        app.create_schema()
        with psycopg.connect(conninfo(url), autocommit=True) as conn:
            conn.execute(FILL, (args.events,))
            conn.execute("VACUUM ANALYZE asanoha_events")
            conn.execute("CREATE TABLE raw_positions (name text PRIMARY KEY, position bigint)")
            conn.execute("INSERT INTO raw_positions VALUES ('raw', 0)")
        best: dict[str, Throughput] = {}
        for round_ in range(1, args.rounds + 1):
            for name, run in (
                ("asanoha", lambda: run_asanoha(app, counter)),
                ("raw", lambda: run_raw(url)),
            ):
                result = run()
                if result.calls != args.events:
                    raise RuntimeError(f"{name} handled {result.calls} of {args.events} events")
                if name not in best or result.rate > best[name].rate:
                    best[name] = result
                print(f"  round {round_}  {name:<10}{result.rate:10.0f} events/s")
        return best["asanoha"], best["raw"]
    finally:
        app.close()


def run_asanoha(app: App, counter: list[int]) -> Throughput:
    """Rewind the consumer, then time ``run_once`` until it has caught up."""
    with app.database.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE asanoha_consumers SET position = 0, gaps = '[]' WHERE name = %(name)s",
            {"name": CONSUMER},
        )
    counter[0] = 0
    started, cpu = time.perf_counter(), time.process_time()
    app.consumers.run_once([CONSUMER])
    return Throughput(counter[0], time.perf_counter() - started, time.process_time() - cpu)


def run_raw(url: str) -> Throughput:
    """Read batches in id order and advance a position row per batch, by hand."""
    handled = 0
    with psycopg.connect(conninfo(url)) as conn:
        conn.execute("UPDATE raw_positions SET position = 0")
        conn.commit()
        started, cpu = time.perf_counter(), time.process_time()
        position = 0
        while True:
            with conn.transaction():
                conn.execute("SELECT position FROM raw_positions WHERE name = 'raw' FOR UPDATE")
                rows = conn.execute(RAW_READ, (position, [EVENT_TYPE], BATCH_SIZE)).fetchall()
                if not rows:
                    break
                handled += len(rows)
                position = rows[-1][0]
                conn.execute(RAW_ADVANCE, (position, "raw"))
        return Throughput(handled, time.perf_counter() - started, time.process_time() - cpu)


# -- part 2: writers with a consumer beside them --------------------------------------------


def write_path(url: str, args: argparse.Namespace) -> tuple[Throughput, Throughput]:
    """Best rounds of the writer without consumers and with one advancing beside it."""
    prefix = f"asanoha-bench-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        database_url=url,
        database_pool_size=WRITE_THREADS + 2,
        broker_url=BROKER_URL,
        queue_prefix=prefix,
        consumer_tick_interval=0,
    )
    alone = App([bench_feature()], settings)
    beside = App([bench_feature(), counting_feature([0])], settings)
    best: dict[str, Throughput] = {}
    try:
        for app in (alone, beside):
            # One write first: the process-wide metrics are registered on first use.
            with asanoha_worker(app) as write:
                write(0)
        for round_ in range(1, args.rounds + 1):
            for name, app in (("without", alone), ("with", beside)):
                with advancing(app if name == "with" else None):
                    result = measure_writes(app, args.seconds)
                if name not in best or result.rate > best[name].rate:
                    best[name] = result
                print(f"  round {round_}  {name + ' consumer':<18}{result.rate:8.0f} writes/s")
        print(f"  the consumer handled {sum(ADVANCED)} events meanwhile")
        return best["without"], best["with"]
    finally:
        if "celery" in beside.__dict__:
            from asanoha.workers.lanes import delete_queues, lane_queues

            delete_queues(beside.celery, lane_queues(settings))
        alone.close()
        beside.close()


def measure_writes(app: App, seconds: float) -> Throughput:
    """Warm up, then measure the service-layer create with ``WRITE_THREADS`` threads."""
    run_threads(lambda: asanoha_worker(app), WRITE_THREADS, seconds=warm_up_seconds(seconds))
    return run_threads(lambda: asanoha_worker(app), WRITE_THREADS, seconds=seconds)


@contextmanager
def advancing(app: App | None) -> Iterator[None]:
    """Another process advancing ``app``'s consumers while the block runs (what a worker
    does; in its own process, as a worker is, so it does not share the writers' GIL)."""
    if app is None:
        yield
        return
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    handled = context.Value("q", 0)
    process = context.Process(
        target=advance_until, args=(app.settings.database_url, stop, handled), daemon=True
    )
    process.start()
    try:
        yield
    finally:
        stop.set()
        process.join(timeout=60)
    if process.exitcode != 0:
        raise RuntimeError(f"the advancing process failed (exit code {process.exitcode})")
    ADVANCED.append(int(handled.value))


#: Events the advancing processes handled, one entry per measurement.
ADVANCED: list[int] = []


def advance_until(database_url: str, stop: Any, handled: Any) -> None:
    """The advancing process: run the consumer until ``stop`` is set."""
    counter = [0]
    app = App(
        [bench_feature(), counting_feature(counter)],
        Settings(database_url=database_url, consumer_wake=False, consumer_tick_interval=0),
    )
    try:
        # As often as one writing process's wake-ups arrive at most (they are coalesced).
        while not stop.wait(WAKE_INTERVAL):
            app.consumers.run_once()
    finally:
        handled.value = counter[0]
        app.close()


if __name__ == "__main__":
    sys.exit(main())
