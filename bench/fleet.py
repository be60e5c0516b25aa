"""The fleet's ceiling on one machine: API processes, workers and a partitioned consumer as
separate processes, each scaled 1 -> 2 -> 4, each against the same run at 1.

    .venv/bin/python bench/fleet.py [--components writes jobs consumer] [--counts 1 2 4]
                                    [--seconds 5] [--jobs 3000] [--events 4000] [--rounds 2]

- **writes**: ``asanoha serve --workers N`` (N API processes) answering ``POST
  /api/write/...`` creates for ``--seconds`` from ``--clients`` client threads, spread over
  ``--client-processes`` processes of their own (``_fleet_client.py``).
- **jobs**: N ``asanoha worker --concurrency 1`` processes on a backlog of ``--jobs`` no-op
  job rows; each pool process's first job waits at a gate until every worker is up, and the
  rate runs from opening the gate to the last job's end.
- **consumer**: N ``asanoha worker --concurrency 1`` processes and a consumer with N
  partitions whose handler writes a row per event (``_partitioned_app.py``) catching up on
  ``--events`` events, from enabling the consumer until every event has its row.

Each measurement gets a fresh database. Beside each rate: how busy the machine's CPUs were,
Postgres's share of that, the server's commits/s (commit records in its WAL, read with
``pg_walinspect``; the database's ``pg_stat_database.xact_commit`` delta beside it as
"reported", which lags), the WAL it wrote per second (``pg_current_wal_lsn``), the CPU cores
each group of processes used (the API processes, the client processes, the workers,
Postgres), the CPU per unit of work and the load average (see ``_fleet_probe.py``). A first
measurement gives the server's commit ceiling on this machine: ``--clients`` connections
committing one-row inserts as fast as they can. Rounds alternate the counts and the
components, and each one's best round is kept (other work shares these machines).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    Work,
    bench_feature,
    conninfo,
    describe_setup,
    run_threads,
    scratch_database,
    warm_up_seconds,
)
from _fleet_client import client_process
from _fleet_jobs_app import GATE_ENV, GATED
from _fleet_jobs_app import feature as jobs_feature
from _fleet_probe import Groups, Window, watching
from _partitioned_app import CONSUMER, partitioned_feature
from _processes import Started, descendants, started, wait_for_output, wait_until
from _results import Figure, safe_ratio, write_figures
from _stamps import STAMPS_ENV, read_stamps
from asanoha import App, Settings
from asanoha.platform.http.auth import issue_token
from asanoha.workers import dispatch_job
from http_write import running_server
from partitioned_consumer import copies, fill

BENCH_DIR = Path(__file__).resolve().parent
BROKER_URL = "redis://127.0.0.1:6379/0"
COMPONENTS = ("writes", "jobs", "consumer")
SECRET = "ASANOHA_JWT_SECRET"
UNITS = {"writes": "writes/s", "jobs": "jobs/s", "consumer": "events/s"}


@dataclass(frozen=True)
class Measured:
    """One measurement: units of work done, over how long, and what the machine did."""

    units: int
    seconds: float
    window: Window

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds else 0.0


def main(argv: list[str] | None = None) -> int:
    """Measure the commit ceiling, then each component at each count, in alternating
    rounds; print the curves and write the figures."""
    args = parse_args(argv)
    # A SIGTERM unwinds like an error, so every process the run started is stopped and
    # every database it made is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Every process the run starts signs and checks tokens with this secret.
    os.environ[SECRET] = secrets.token_hex(32)
    print(f"fleet on {os.cpu_count()} CPUs; {describe_setup(args.database_url)}")
    ceiling = commit_ceiling(args)
    print(
        f"commit ceiling: {ceiling.rate:,.0f} commits/s from {args.clients} connections "
        f"(one-row inserts); {ceiling.window.summary()}"
    )
    best: dict[tuple[str, int], Measured] = {}
    measure = {"writes": measure_writes, "jobs": measure_jobs, "consumer": measure_consumer}
    for round_ in range(1, args.rounds + 1):
        for component in args.components:
            for count in args.counts:
                done = measure[component](count, args)
                key = (component, count)
                if key not in best or done.rate > best[key].rate:
                    best[key] = done
                print(
                    f"  round {round_}  {component:<8} x{count}  {done.rate:8,.0f} "
                    f"{UNITS[component]}  ({done.window.summary()})",
                    flush=True,
                )
    write_figures(args.json, report(best, ceiling, args))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", nargs="+", choices=COMPONENTS, default=list(COMPONENTS))
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=5.0, help="per writes measurement")
    parser.add_argument("--clients", type=int, default=16, help="client threads of the writes")
    parser.add_argument(
        "--client-processes", type=int, default=2, help="processes the client threads run in"
    )
    parser.add_argument("--jobs", type=int, default=3000, help="backlog per jobs measurement")
    parser.add_argument("--events", type=int, default=4000, help="backlog per consumer run")
    parser.add_argument("--rounds", type=int, default=2, help="each one's best is kept")
    parser.add_argument("--timeout", type=float, default=300, help="per measurement")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1 s, 300 jobs, 300 events, 1 round"
    )
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates dbs)")
    parser.add_argument("--broker-url", default=BROKER_URL)
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.jobs, args.events, args.rounds = 1.0, 300, 300, 1
    return args


# -- the commit ceiling ---------------------------------------------------------------------


def commit_ceiling(args: argparse.Namespace) -> Measured:
    """Commits/s of ``args.clients`` connections inserting one row per transaction."""
    with scratch_database(args.database_url, "asanoha_bench_fleet") as url, ExitStack() as stack:
        with psycopg.connect(conninfo(url), autocommit=True) as conn:
            conn.execute("CREATE TABLE ceiling (id bigserial PRIMARY KEY, n bigint)")
        # Open for the whole measurement: a backend that exits takes its CPU time with it.
        idle = [
            stack.enter_context(psycopg.connect(conninfo(url), autocommit=True))
            for _ in range(args.clients)
        ]

        @contextmanager
        def committer() -> Iterator[Work]:
            conn = idle.pop()
            yield lambda n: conn.execute("INSERT INTO ceiling (n) VALUES (%s)", (n,))
            idle.append(conn)

        seconds = min(args.seconds, 3.0)
        run_threads(committer, args.clients, seconds=warm_up_seconds(seconds))
        with watching(url, lambda: {"client": [os.getpid()]}) as window:
            done = run_threads(committer, args.clients, seconds=seconds)
    return Measured(done.calls, done.seconds, window)


# -- writes: API processes ------------------------------------------------------------------


def measure_writes(processes: int, args: argparse.Namespace) -> Measured:
    """HTTP creates against ``processes`` API processes, from ``args.client_processes``
    client processes with ``args.clients`` threads in all."""
    with scratch_database(args.database_url, "asanoha_bench_fleet") as url:
        app = App([bench_feature()], Settings(database_url=url))
        try:
            app.create_schema()
            token = issue_token(app.settings, USER)
        finally:
            app.close()
        # Connections per API process: its share of the clients and some slack.
        pool = args.clients // processes + 2
        with (
            running_server("asanoha", processes, url, pool) as server,
            clients(server.base_url, token, args) as go,
        ):

            def groups() -> Groups:
                return {
                    "API": [server.pid, *descendants(server.pid)],
                    "client": [p.pid for p in go.processes if p.pid],
                }

            with watching(url, groups) as window:
                requests, seconds = go()
    return Measured(requests, seconds, window)


@dataclass
class _Clients:
    processes: list[Any]
    run: Callable[[], tuple[int, float]]

    def __call__(self) -> tuple[int, float]:
        return self.run()


@contextmanager
def clients(base_url: str, token: str, args: argparse.Namespace) -> Iterator[_Clients]:
    """Client processes, warmed up against ``base_url``; calling the result runs them for
    ``args.seconds`` and returns (requests, seconds)."""
    context = multiprocessing.get_context("spawn")
    ready, results, start = context.Queue(), context.Queue(), context.Event()
    host, port = base_url.removeprefix("http://").split(":")
    count = args.client_processes
    processes = [
        context.Process(
            target=client_process,
            args=(
                host,
                int(port),
                f"/api/write/{CREATE_QN}",
                token,
                max(1, args.clients // count),
                warm_up_seconds(args.seconds),
                args.seconds,
                index * 10_000_000,
                ready,
                start,
                results,
            ),
            daemon=True,
        )
        for index in range(count)
    ]
    for process in processes:
        process.start()
    try:
        if not all(ready.get(timeout=120) for _ in processes):
            raise RuntimeError(f"a client failed: {results.get(timeout=10)}")

        def run() -> tuple[int, float]:
            start.set()
            found = [results.get(timeout=args.seconds + 120) for _ in processes]
            failed = [f for f in found if isinstance(f, str)]
            if failed:
                raise RuntimeError(f"a client failed: {failed[0]}")
            return sum(f[0] for f in found), max(f[1] for f in found)

        yield _Clients(processes, run)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()


# -- jobs: worker processes -----------------------------------------------------------------


def measure_jobs(workers: int, args: argparse.Namespace) -> Measured:
    """``workers`` worker processes (concurrency 1) on a backlog of no-op jobs."""
    with (
        scratch_database(args.database_url, "asanoha_bench_fleet") as url,
        tempfile.TemporaryDirectory(prefix="asanoha-bench-fleet-") as folder,
    ):
        prefix = f"benchfleet{uuid.uuid4().hex[:8]}"
        settings = worker_settings(url, prefix, args)
        app = App([jobs_feature], settings)
        try:
            app.create_schema()
            enqueue(app, args.jobs)
        finally:
            app.close()
        gate, stamps = Path(folder) / "gate", Path(folder) / "stamps"
        gate.mkdir()
        env = worker_env(settings) | {GATE_ENV: str(gate), STAMPS_ENV: str(stamps)}
        try:
            with fleet(workers, "_fleet_jobs_app:app", env, "WARNING") as running:
                # Every pool process holds its first job at the gate: all are up.
                wait_until(
                    lambda: len(list(gate.glob("waiting-*"))) >= workers,
                    running[0],
                    "every worker at the gate",
                    timeout=args.timeout,
                )
                with watching(url, lambda: trees(running)) as window:
                    (gate / "go").touch()
                    opened = time.monotonic()
                    wait_until(
                        lambda: len(read_stamps(stamps)) >= args.jobs,
                        running[0],
                        "the backlog",
                        timeout=args.timeout,
                    )
            ends = read_stamps(stamps)
        finally:
            drop_queues(args.broker_url, prefix)
    return Measured(len(ends), ends[-1] - opened, window)


def enqueue(app: App, jobs: int) -> None:
    """``jobs`` job rows of the gated job, their messages on the broker (8 threads: the
    backlog is not what is measured)."""

    @contextmanager
    def enqueuer() -> Iterator[Work]:
        yield lambda n: dispatch_job(app, GATED, {})

    run_threads(enqueuer, 8, seconds=0, calls=jobs)


# -- consumer deliveries: partitions over worker processes ----------------------------------


def measure_consumer(partitions: int, args: argparse.Namespace) -> Measured:
    """A consumer with ``partitions`` partitions over as many worker processes catching up
    on ``args.events`` events, its handler writing a row per event."""
    with scratch_database(args.database_url, "asanoha_bench_fleet") as url:
        prefix = f"benchfleet{uuid.uuid4().hex[:8]}"
        settings = worker_settings(url, prefix, args)
        app = App([partitioned_feature(partitions)], settings)
        try:
            app.create_schema()
            app.consumers.disable(CONSUMER)
            fill(url, args.events)
            env = worker_env(settings) | {"BENCH_PARTITIONS": str(partitions)}
            with fleet(partitions, "_partitioned_app:app", env, "INFO") as running:
                for worker in running:
                    wait_for_output(worker, "ready", timeout=args.timeout)
                with watching(url, lambda: trees(running)) as window:
                    began = time.perf_counter()
                    app.consumers.enable(CONSUMER)
                    app.celery_jobs.request_consumer_wakes()
                    wait_until(
                        lambda: copies(url) >= args.events,
                        running[0],
                        "every event's row",
                        timeout=args.timeout,
                    )
                    seconds = time.perf_counter() - began
        finally:
            app.close()
            drop_queues(args.broker_url, prefix)
    return Measured(args.events, seconds, window)


# -- the worker fleet -----------------------------------------------------------------------


def worker_settings(url: str, prefix: str, args: argparse.Namespace) -> Settings:
    return Settings(
        database_url=url,
        broker_url=args.broker_url,
        queue_prefix=prefix,
        # The run starts the consumer itself; no wake-ups from the handlers' writes.
        consumer_wake=False,
        jwt_secret=os.environ[SECRET],
    )


def worker_env(settings: Settings) -> dict[str, str]:
    return {
        "ASANOHA_DATABASE_URL": settings.database_url,
        "ASANOHA_BROKER_URL": settings.broker_url,
        "ASANOHA_QUEUE_PREFIX": settings.queue_prefix,
        "ASANOHA_CONSUMER_WAKE": "false",
        "ASANOHA_JWT_SECRET": settings.jwt_secret,
        "PYTHONPATH": str(BENCH_DIR),
    }


@contextmanager
def fleet(count: int, app: str, env: dict[str, str], loglevel: str) -> Iterator[list[Started]]:
    """``count`` ``asanoha worker --concurrency 1`` processes, stopped at the end."""
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", app]
    command += ["--concurrency", "1", "--loglevel", loglevel]
    with ExitStack() as stack:
        yield [
            stack.enter_context(started(command, env=env, cwd=str(BENCH_DIR))) for _ in range(count)
        ]


def trees(running: list[Started]) -> Groups:
    """The worker processes and their pool processes, as one group; and the broker."""
    return {
        "workers": [pid for w in running for pid in (w.pid, *descendants(w.pid))],
        "Redis": redis_servers(),
    }


def redis_servers() -> list[int]:
    """The Redis servers of this machine (the broker, if it runs here)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "redis-server":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def drop_queues(broker_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(broker_url)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


# -- report ---------------------------------------------------------------------------------


LABELS = {
    "writes": "HTTP creates, {n} API process(es), {clients} client threads",
    "jobs": "no-op jobs, {n} worker process(es) at concurrency 1",
    "consumer": "consumer writing a row per event, {n} partition(s) over {n} worker(s)",
}


def report(
    best: dict[tuple[str, int], Measured], ceiling: Measured, args: argparse.Namespace
) -> list[Figure]:
    """Print each component's curve against its run at 1; the figures for ``run_all.py``."""
    figures = [
        Figure(
            benchmark="fleet",
            name=f"commit ceiling: one-row inserts, {args.clients} connections",
            value=round(ceiling.rate),
            unit="commits/s",
            target="(context)",
            note=ceiling.window.summary(),
        )
    ]
    for component in args.components:
        base = best.get((component, args.counts[0]))
        print()
        print(f"{component}: best of {args.rounds} round(s), against {args.counts[0]}")
        for count in args.counts:
            done = best.get((component, count))
            if done is None:
                continue
            ratio = safe_ratio(done.rate, base.rate if base else None)
            window = done.window
            cores = ", ".join(
                f"{name} {window.per_second(seconds):.2f}" for name, seconds in window.cpu.items()
            )
            cores += f", Postgres {window.per_second(window.postgres):.2f}"
            print(
                f"  x{count}  {done.rate:8,.0f} {UNITS[component]}  {ratio or 0:5.2f}x   "
                f"{window.summary()}\n"
                f"        cores used: {cores}; CPU ms per unit: {window.cpu_ms_per(done.units)}"
            )
            figures.append(
                Figure(
                    benchmark="fleet",
                    name=LABELS[component].format(n=count, clients=args.clients),
                    value=round(done.rate),
                    unit=UNITS[component],
                    peer=f"the same at {args.counts[0]}",
                    peer_value=round(base.rate) if base else None,
                    ratio_label=f"N / {args.counts[0]}",
                    ratio=ratio,
                    target="(curve)",
                    note=(
                        f"{window.summary()}; cores used: {cores}; CPU ms per unit: "
                        f"{window.cpu_ms_per(done.units)}"
                    ),
                )
            )
    return figures


if __name__ == "__main__":
    sys.exit(main())
