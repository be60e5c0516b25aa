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
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy import event

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
from _fleet_probe import watching
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
WRITE_RATIO_TARGET = 0.85
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
    """Run both parts (or the one ``--part`` names) and print the figures with their
    targets."""
    args = parse_args(argv)
    figures: list[Figure] = []
    with scratch_database(args.database_url, "asanoha_bench_consumer") as url:
        if args.part != 2:
            print(f"consumer catch-up, {args.events} events; {describe_setup(url)}")
            asanoha, raw = catch_up(url, args)
            figures.append(catch_up_figure(args, asanoha, raw))
            print()
        if args.part != 1:
            pinned = ", writer on CPU 0, consumer on CPU 1" if args.pin else ""
            print(
                f"write path with a consumer beside it, {WRITE_THREADS} threads, "
                f"{args.seconds:g} s{pinned}; {describe_setup(url)}"
            )
            alone, beside = write_path(url, args)
            figures.append(write_figure(args, alone, beside))
    if args.part != 2:
        print()
        print(f"{'events/s catching up (best round)':<44}{'':>4}")
        print(f"  asanoha consumer (no-op handler)          {asanoha.rate:10.0f}")
        print(f"  raw psycopg loop (same batches)           {raw.rate:10.0f}")
        print(
            f"  asanoha / raw                             {asanoha.rate / raw.rate:10.2f}"
            f"   target >= {CATCHUP_RATIO_TARGET}"
        )
        print(
            f"  asanoha events/s                          {asanoha.rate:10.0f}"
            f"   target >= {CATCHUP_RATE_TARGET:,}"
        )
    if args.part != 1:
        print()
        print("writes/s, asanoha service, 8 threads (best round)")
        print(f"  without consumers                         {alone.rate:10.0f}")
        print(f"  with a consumer advancing beside it       {beside.rate:10.0f}")
        print(
            f"  with / without                            {beside.rate / alone.rate:10.2f}"
            f"   target >= {WRITE_RATIO_TARGET}"
        )
    write_figures(args.json, figures)
    return 0


def catch_up_figure(args: argparse.Namespace, asanoha: Throughput, raw: Throughput) -> Figure:
    """The catch-up rate against the raw loop."""
    catchup = safe_ratio(asanoha.rate, raw.rate)
    return Figure(
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
    )


def write_figure(args: argparse.Namespace, alone: Throughput, beside: Throughput) -> Figure:
    """The writers with a consumer beside them against the writers alone."""
    writes = safe_ratio(beside.rate, alone.rate)
    pinned = "; writer on CPU 0, consumer on CPU 1" if args.pin else ""
    return Figure(
        benchmark="consumer_catchup",
        name=f"service-layer writes, {WRITE_THREADS} threads, consumer advancing beside{pinned}",
        value=round(beside.rate),
        unit="writes/s",
        peer="the same writer on an application without consumers",
        peer_value=round(alone.rate),
        ratio_label="with / without",
        ratio=writes,
        target=f">= {WRITE_RATIO_TARGET}",
        target_met=at_least(writes, WRITE_RATIO_TARGET),
    )


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
    parser.add_argument(
        "--profile",
        action="store_true",
        help="part 2: where the time goes (CPU per process, wait events, the passes' "
        "transactions) and the writer with the consumer registered but not advanced",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="part 2: the writer and its backends on CPU 0, the consumer and its on CPU 1",
    )
    parser.add_argument("--part", type=int, choices=(1, 2), help="run only this part")
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


@dataclass
class Part2:
    """Part 2's options: ``profile`` adds where the time goes to every measurement and
    measures the writer with the consumer registered but nobody advancing it; ``pin`` runs
    the writer (and its Postgres backends) on CPU 0 and the consumer (and its backends) on
    CPU 1, in every measurement alike."""

    seconds: float
    rounds: int
    profile: bool = False
    pin: bool = False


#: Which CPU each side runs on with ``--pin``.
WRITER_CPU, CONSUMER_CPU = 0, 1


def write_path(url: str, args: argparse.Namespace) -> tuple[Throughput, Throughput]:
    """Best rounds of the writer without consumers and with one advancing beside it."""
    part = Part2(args.seconds, args.rounds, args.profile, args.pin)
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
    variants: list[tuple[str, App, bool]] = [("without", alone, False), ("with", beside, True)]
    if part.profile:
        variants.insert(1, ("registered", beside, False))
    backends = {id(alone): record_backends(alone), id(beside): record_backends(beside)}
    best: dict[str, Throughput] = {}
    try:
        beside.create_schema()  # part 1 has made it, unless it did not run
        for app in (alone, beside):
            # One write first: the process-wide metrics are registered on first use.
            with asanoha_worker(app) as write:
                write(0)
        for round_ in range(1, part.rounds + 1):
            for name, app, advance in variants:
                with advancing(app if advance else None, part) as consumer:
                    result, profile = measure_writes(app, part, backends[id(app)], consumer)
                if name not in best or result.rate > best[name].rate:
                    best[name] = result
                print(f"  round {round_}  {name + ' consumer':<22}{result.rate:8.0f} writes/s")
                if profile:
                    print(profile)
        print(f"  the consumer handled {sum(ADVANCED)} events meanwhile")
        if "registered" in best:
            print(
                f"  registered, not advanced / without: "
                f"{best['registered'].rate / best['without'].rate:.2f}"
            )
        return best["without"], best["with"]
    finally:
        if part.pin:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        if "celery" in beside.__dict__:
            from asanoha.workers.lanes import app_queues, delete_queues

            delete_queues(beside.celery, app_queues(settings))
        alone.close()
        beside.close()


def record_backends(app: App) -> list[int]:
    """The Postgres backend of every connection ``app`` opens, as it opens them."""
    found: list[int] = []

    def connected(dbapi_connection: Any, _: Any) -> None:
        found.append(int(dbapi_connection.info.backend_pid))

    event.listen(app.database.engine, "connect", connected)
    return found


def measure_writes(
    app: App, part: Part2, backends: list[int], consumer: Consumer | None
) -> tuple[Throughput, str]:
    """Warm up, then measure the service-layer create with ``WRITE_THREADS`` threads; with
    ``part.profile``, what the machine, Postgres and the consumer's passes did meanwhile."""
    if part.pin:
        # Before the threads start: they inherit the main thread's CPUs.
        os.sched_setaffinity(0, {WRITER_CPU})
    run_threads(lambda: asanoha_worker(app), WRITE_THREADS, seconds=warm_up_seconds(part.seconds))
    if part.pin:
        pin(backends, WRITER_CPU)
    if not part.profile:
        return run_threads(lambda: asanoha_worker(app), WRITE_THREADS, seconds=part.seconds), ""
    theirs = consumer.backends() if consumer else []

    def groups() -> dict[str, list[int]]:
        found = {"writer": [os.getpid()], "writer's backends": list(backends)}
        if consumer:
            found |= {"consumer": [consumer.pid], "consumer's backends": theirs}
        return found

    with sampling(app.settings.database_url, backends, theirs) as waits:
        if consumer:
            consumer.reset()
        with watching(app.settings.database_url, groups) as window:
            result = run_threads(lambda: asanoha_worker(app), WRITE_THREADS, seconds=part.seconds)
        passes = consumer.passes() if consumer else None
    cores = ", ".join(
        f"{name} {window.per_second(spent):.2f}" for name, spent in window.cpu.items()
    )
    lines = [
        f"      {window.summary()}",
        f"      cores: {cores}, all Postgres {window.per_second(window.postgres):.2f}",
        *(f"      {line}" for line in waits.lines()),
    ]
    if passes is not None:
        lines.append(f"      consumer passes: {passes}")
    return result, "\n".join(lines)


def pin(pids: list[int], cpu: int) -> None:
    """Run ``pids`` (processes of this machine, Postgres backends too) on ``cpu`` only."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.sched_setaffinity(pid, {cpu})


@dataclass
class Consumer:
    """The advancing process, as the measurement sees it."""

    pid: int
    control: Any
    answers: Any

    def _ask(self, what: str) -> Any:
        self.control.put(what)
        return self.answers.get(timeout=30)

    def backends(self) -> list[int]:
        """Its Postgres backends."""
        found: list[int] = self._ask("backends")
        return found

    def reset(self) -> None:
        """Start counting its passes afresh."""
        self._ask("reset")

    def passes(self) -> str:
        """Its passes since ``reset``: how many, how long each transaction held the cursor."""
        found: str = self._ask("passes")
        return found


@contextmanager
def advancing(app: App | None, part: Part2 | None = None) -> Iterator[Consumer | None]:
    """Another process advancing ``app``'s consumers while the block runs (what a worker
    does; in its own process, as a worker is, so it does not share the writers' GIL)."""
    if app is None:
        yield None
        return
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    handled = context.Value("q", 0)
    control, answers, ready = context.Queue(), context.Queue(), context.Event()
    cpu = CONSUMER_CPU if part is not None and part.pin else None
    process = context.Process(
        target=advance_until,
        args=(app.settings.database_url, stop, handled, control, answers, cpu, ready),
        daemon=True,
    )
    process.start()
    try:
        # Starting the process (imports, the app) takes seconds on a busy machine: the
        # writers start once it advances, or they would be measured partly without it.
        if not ready.wait(timeout=120):
            raise RuntimeError("the advancing process did not start")
        yield Consumer(process.pid or 0, control, answers)
    finally:
        stop.set()
        process.join(timeout=60)
    if process.exitcode != 0:
        raise RuntimeError(f"the advancing process failed (exit code {process.exitcode})")
    ADVANCED.append(int(handled.value))


#: Events the advancing processes handled, one entry per measurement.
ADVANCED: list[int] = []


def advance_until(
    database_url: str,
    stop: Any,
    handled: Any,
    control: Any = None,
    answers: Any = None,
    cpu: int | None = None,
    ready: Any = None,
) -> None:
    """The advancing process: run the consumer until ``stop`` is set (answering what the
    measurement asks on ``control`` between two rounds); ``ready`` is set after its first
    round."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    counter = [0]
    app = App(
        [bench_feature(), counting_feature(counter)],
        Settings(database_url=database_url, consumer_wake=False, consumer_tick_interval=0),
    )
    backends = record_backends(app)
    clock = PassClock(app, counter)
    try:
        app.consumers.run_once()
        if ready is not None:
            ready.set()
        # As often as one writing process's wake-ups arrive at most (they are coalesced).
        while not stop.wait(WAKE_INTERVAL):
            if cpu is not None:
                pin(backends, cpu)
            app.consumers.run_once()
            while control is not None and not control.empty():
                asked = control.get()
                if asked == "backends":
                    answers.put(list(backends))
                elif asked == "reset":
                    clock.reset()
                    answers.put(None)
                elif asked == "passes":
                    answers.put(clock.describe())
    finally:
        handled.value = counter[0]
        app.close()


class PassClock:
    """How long each transaction of a process's engine lasts (begin to commit or rollback):
    in the advancing process, a pass's hold on its cursor row."""

    def __init__(self, app: App, counter: list[int]) -> None:
        self._counter = counter
        self._began: float | None = None
        self.reset()
        engine = app.database.engine
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "commit", self._end)
        event.listen(engine, "rollback", self._end)

    def reset(self) -> None:
        self.held: list[float] = []
        self._since = time.perf_counter()
        self._events = self._counter[0]

    def _begin(self, _: Any) -> None:
        self._began = time.perf_counter()

    def _end(self, _: Any) -> None:
        if self._began is not None:
            self.held.append(time.perf_counter() - self._began)
            self._began = None

    def describe(self) -> str:
        wall = time.perf_counter() - self._since
        held = sorted(self.held)
        if not held:
            return "none"
        events = self._counter[0] - self._events
        p95 = held[min(len(held) - 1, int(len(held) * 0.95))]
        return (
            f"{len(held) / wall:.0f}/s, {events / len(held):.1f} events each; transaction "
            f"{1000 * statistics.mean(held):.2f} ms mean, {1000 * p95:.2f} p95, "
            f"{1000 * held[-1]:.2f} max; in a transaction {sum(held) / wall:.0%} of the time"
        )


# -- sampling Postgres ----------------------------------------------------------------------

_ACTIVITY = (
    "SELECT pid, state, coalesce(wait_event_type || ':' || wait_event, 'CPU'), "
    "(SELECT count(*) FROM pg_locks WHERE NOT granted) "
    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


@dataclass
class Waits:
    """What the writers' and the consumer's backends were doing, sample by sample."""

    writers: Counter[str] = field(default_factory=Counter)
    consumer: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    lock_waits: int = 0

    def lines(self) -> list[str]:
        return [
            f"writers' backends: {_shares(self.writers)}",
            f"consumer's backend: {_shares(self.consumer)}",
            f"ungranted locks in {self.lock_waits} of {self.samples} samples of pg_locks",
        ]


def _shares(found: Counter[str]) -> str:
    total = sum(found.values())
    if not total:
        return "no samples"
    return ", ".join(f"{what} {n / total:.0%}" for what, n in found.most_common(6))


@contextmanager
def sampling(url: str, writers: list[int], consumer: list[int]) -> Iterator[Waits]:
    """Sample ``pg_stat_activity`` and ``pg_locks`` every 10 ms from another process while the
    block runs: per backend, ``idle``, ``idle in transaction`` (waiting for its client), or
    active on the CPU or waiting on a wait event."""
    context = multiprocessing.get_context("spawn")
    ready, stop, results = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=sample_until, args=(url, ready, stop, results), daemon=True)
    process.start()
    if not ready.wait(timeout=120):
        raise RuntimeError("the sampling process did not start")
    waits = Waits()
    try:
        yield waits
    finally:
        stop.set()
        rows, samples = results.get(timeout=60)
        process.join(timeout=30)
    mine, theirs = set(writers), set(consumer)
    for pid, state, wait, blocked in rows:
        what = wait if state == "active" else str(state)
        if pid in mine:
            waits.writers[what] += 1
        elif pid in theirs:
            waits.consumer[what] += 1
        waits.lock_waits += blocked > 0
    waits.samples = samples
    # Each sample's ungranted-lock count came once per backend row: count samples instead.
    waits.lock_waits = min(waits.lock_waits, samples)


def sample_until(url: str, ready: Any, stop: Any, results: Any) -> None:
    """The sampling process."""
    rows: list[tuple[int, str, str, int]] = []
    samples = 0
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        ready.set()
        while not stop.wait(0.01):
            rows += conn.execute(_ACTIVITY).fetchall()
            samples += 1
    results.put((rows, samples))


if __name__ == "__main__":
    sys.exit(main())
