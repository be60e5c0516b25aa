"""Job throughput of the worker processes an operator runs: ``asanoha worker`` against a bare
``celery worker`` with the same pool, concurrency and delivery settings on the same broker.

    .venv/bin/python bench/worker_throughput.py [--jobs 2000] [--concurrency 2] [--repeat 3]
                                                [--keys 8] [--broker-url redis://127.0.0.1:6379/0]

Each side gets ``--jobs`` no-op messages queued before its worker starts (asanoha's through
``dispatch_job``: a job row each, the message a pointer to it). Both workers stamp the end of
every task into one file with the same hook (``_stamps.py``); the rate is the number of
messages between the first and the last end over that time, so start-up is not counted. The
CPU per message is that of the whole process tree (main process and pool processes) from the
first end to the last. On the asanoha side every message is
claimed on its job row and ended there (two statements on Postgres), and the relay runs in
the main process, as in production. The sides alternate ``--repeat`` times and medians are
reported. ``bench/job_throughput.py`` measures the same on the test stack's in-process
thread-pool worker.

Then the same backlog of a ``sequential`` job (``--keys`` distinct keys, enqueued in turn)
and of a ``skip`` job (a key of its own per message, so that each enqueue runs), each
against the parallel no-op job of the same runs: what a concurrency mode costs a worker.
Last, the backlog behind one ``sequential`` key: its rows wait for the key, and each is
delivered when the end of the one before wakes it; the deliveries per row are counted
(target <= 1.1: a waiting row costs no delivery while it waits).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _processes import started, tree_cpu, wait_until
from _results import Figure, at_least, safe_ratio, write_figures
from _stamps import STAMPS_ENV, read_stamps
from _worker_jobs import NOOP, SEQUENTIAL, SKIP, feature
from asanoha import App, Settings
from asanoha.workers import dispatch_job

TARGET = 0.8
#: The mode whose rows all wait behind one key, and the deliveries per row it may cost.
ONE_KEY = "sequential, 1 key"
DELIVERIES_TARGET = 1.1
BENCH_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Mode:
    """A job measured on the asanoha worker, and the payload of its ``i``-th message."""

    label: str
    job: str
    payload: Callable[[int], dict[str, Any]]


def modes(keys: int) -> list[Mode]:
    """The parallel no-op job first (the peer of the others), then the keyed ones."""
    return [
        Mode("parallel", NOOP, lambda i: {}),
        Mode(f"sequential, {keys} keys", SEQUENTIAL, lambda i: {"key": i % keys}),
        Mode("skip, distinct keys", SKIP, lambda i: {"key": i}),
        Mode(ONE_KEY, SEQUENTIAL, lambda i: {"key": 0}),
    ]


@dataclass(frozen=True)
class Run:
    """One side's run: messages per second between the first and the last end, and the
    process tree's CPU per message."""

    rate: float
    cpu_ms: float
    #: Ends stamped beyond one per message: deliveries that ran nothing (a row that waited
    #: for its key, a copy of a message), which the rate counts too.
    extra: int = 0
    #: Messages queued for the run.
    jobs: int = 1

    @property
    def deliveries_per_row(self) -> float:
        """Deliveries the worker took per job row."""
        return (self.jobs + self.extra) / max(1, self.jobs)


def main(argv: list[str] | None = None) -> int:
    """Alternate the bare worker and the asanoha worker on each job ``--repeat`` times and
    print the medians."""
    args = parse_args(argv)
    bare: list[Run] = []
    measured = modes(args.keys)
    mine: dict[str, list[Run]] = {mode.label: [] for mode in measured}
    with scratch_database(args.database_url, "asanoha_bench_workers") as url:
        print(
            f"worker throughput: {args.jobs} no-op messages per run, prefork concurrency "
            f"{args.concurrency}, broker {args.broker_url}; {describe_setup(url)}"
        )
        for _ in range(args.repeat):
            bare.append(run_bare(args))
            for mode in measured:
                mine[mode.label].append(run_asanoha(url, args, mode))
    figures = report(bare, mine, args)
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="messages per run")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per side")
    parser.add_argument("--keys", type=int, default=8, help="keys of the sequential job")
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates a db)")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


def run_asanoha(url: str, args: argparse.Namespace, mode: Mode) -> Run:
    """``asanoha worker`` on ``args.jobs`` queued job rows of ``mode``'s job."""
    prefix = f"benchtp{uuid.uuid4().hex[:8]}"
    settings = Settings(
        database_url=url,
        broker_url=args.broker_url,
        queue_prefix=prefix,
        jwt_secret=secrets.token_hex(32),
    )
    app = App([feature], settings=settings)
    try:
        app.create_schema()
        for i in range(args.jobs):
            dispatch_job(app, mode.job, mode.payload(i))
    finally:
        app.close()
    env = {
        "ASANOHA_DATABASE_URL": url,
        "ASANOHA_BROKER_URL": args.broker_url,
        "ASANOHA_QUEUE_PREFIX": prefix,
        "ASANOHA_JWT_SECRET": settings.jwt_secret,
        "BENCH_JOB": mode.job,
    }
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", "_jobs_app:app"]
    command += ["--concurrency", str(args.concurrency), "--loglevel", "WARNING"]
    succeeded_sql = "SELECT count(*) FROM asanoha_job_runs WHERE status = 'succeeded'"
    before = _count(url, succeeded_sql)

    def all_succeeded() -> bool:
        return _count(url, succeeded_sql) - before >= args.jobs

    try:
        run = _measure(command, env, args, all_succeeded)
        succeeded = _count(url, succeeded_sql) - before
        if succeeded != args.jobs:
            raise RuntimeError(
                f"{mode.label}: {succeeded} of {args.jobs} job runs recorded as succeeded"
            )
        return run
    finally:
        _drop_queues(args.broker_url, f"{prefix}.*")


def run_bare(args: argparse.Namespace) -> Run:
    """A bare ``celery worker`` (``_bare_celery.py``) on ``args.jobs`` queued no-op tasks."""
    queue = f"benchtp{uuid.uuid4().hex[:8]}.bare"
    os.environ.update({"BENCH_BROKER_URL": args.broker_url, "BENCH_QUEUE": queue})
    from _bare_celery import app as bare

    with bare.connection_for_write() as connection:
        for _ in range(args.jobs):
            bare.send_task("bench.noop", queue=queue, connection=connection)
    command = [sys.executable, "-m", "celery", "-A", "_bare_celery", "worker"]
    command += [f"--concurrency={args.concurrency}", f"--queues={queue}", "--loglevel=WARNING"]
    env = {"BENCH_BROKER_URL": args.broker_url, "BENCH_QUEUE": queue}
    try:
        return _measure(command, env, args)
    finally:
        _drop_queues(args.broker_url, f"{queue}*")


def _measure(
    command: list[str],
    env: dict[str, str],
    args: argparse.Namespace,
    done: Callable[[], bool] = lambda: True,
) -> Run:
    """Start the worker on its queued messages; rate and CPU once every one has ended and
    ``done()`` holds (asanoha: every job has its succeeded run, for a delivery that ran
    nothing is stamped too)."""
    with tempfile.TemporaryDirectory(prefix="asanoha-bench-stamps-") as folder:
        stamps = Path(folder) / "stamps"
        env = {**env, STAMPS_ENV: str(stamps)}
        with started(command, env=env, cwd=str(BENCH_DIR)) as worker:
            # Logging at WARNING (no line per task): the first end says it is working.
            wait_until(lambda: stamps.exists(), worker, "the first message", timeout=120)
            cpu_at_start = tree_cpu(worker.pid)
            done_at_start = len(read_stamps(stamps))
            wait_until(
                lambda: len(read_stamps(stamps)) >= args.jobs and done(),
                worker,
                "messages",
                timeout=max(120.0, args.jobs / 20),
            )
            cpu = tree_cpu(worker.pid) - cpu_at_start
        ends = read_stamps(stamps)
    rate = (len(ends) - 1) / (ends[-1] - ends[0])
    return Run(
        rate, 1000 * cpu / max(1, args.jobs - done_at_start), len(ends) - args.jobs, args.jobs
    )


def _count(url: str, sql: str) -> int:
    with psycopg.connect(conninfo(url)) as conn:
        found = conn.execute(sql).fetchone()
    return int(found[0]) if found else 0


def _drop_queues(broker_url: str, pattern: str) -> None:
    client = redis.Redis.from_url(broker_url)
    keys = list(client.scan_iter(match=pattern))
    if keys:
        client.delete(*keys)


def report(bare: list[Run], mine: dict[str, list[Run]], args: argparse.Namespace) -> list[Figure]:
    """Print each side's runs and medians; the figures for ``run_all.py``."""
    parallel_label, *keyed_labels = mine
    parallel = mine[parallel_label]
    peer = statistics.median(r.rate for r in bare)
    rate = statistics.median(r.rate for r in parallel)
    ratio = safe_ratio(rate, peer)
    peer_cpu = statistics.median(r.cpu_ms for r in bare)
    cpu = statistics.median(r.cpu_ms for r in parallel)
    sides = [("bare celery worker", bare), ("asanoha worker", parallel)]
    sides += [(f"  {label}", mine[label]) for label in keyed_labels]
    for name, runs in sides:
        listed = ", ".join(f"{r.rate:.0f}" for r in runs)
        median = statistics.median(r.rate for r in runs)
        cpu_ms = statistics.median(r.cpu_ms for r in runs)
        extra = sum(r.extra for r in runs)
        ran_nothing = f"; {extra} deliveries ran nothing" if extra else ""
        per_row = statistics.median(r.deliveries_per_row for r in runs)
        print(
            f"{name:<38}{median:9.0f} /s   (runs: {listed}; {cpu_ms:.2f} ms CPU per message"
            f"{ran_nothing}; {per_row:.2f} deliveries per row)"
        )
    print(f"{'ratio asanoha / bare':<38}{ratio or 0:9.2f}   (target >= {TARGET})")
    figures = [
        Figure(
            benchmark="worker_throughput",
            name=f"no-op jobs, prefork concurrency {args.concurrency}, {args.jobs} queued",
            value=round(rate),
            unit="jobs/s",
            peer="bare celery worker, same options",
            peer_value=round(peer),
            ratio_label="asanoha / peer",
            ratio=ratio,
            target=f">= {TARGET}",
            target_met=at_least(ratio, TARGET),
            note=f"CPU of the process tree {cpu:.2f} vs {peer_cpu:.2f} ms per message",
        )
    ]
    if ONE_KEY in mine:
        per_row = statistics.median(r.deliveries_per_row for r in mine[ONE_KEY])
        print(f"{'deliveries per row behind one key':<38}{per_row:9.2f}   "
              f"(target <= {DELIVERIES_TARGET})")  # fmt: skip
        figures.append(
            Figure(
                benchmark="worker_throughput",
                name=f"deliveries per row, {args.jobs} rows behind one sequential key",
                value=round(per_row, 3),
                unit="deliveries/row",
                peer="one delivery per row",
                peer_value=1,
                ratio_label="deliveries / rows",
                ratio=per_row,
                target=f"<= {DELIVERIES_TARGET}",
                target_met=per_row <= DELIVERIES_TARGET,
                note="a waiting row is woken by the end that frees its key, not polled",
            )
        )
    for label in keyed_labels:
        keyed = statistics.median(r.rate for r in mine[label])
        keyed_ratio = safe_ratio(keyed, rate)
        keyed_cpu = statistics.median(r.cpu_ms for r in mine[label])
        print(f"{'ratio ' + label + ' / parallel':<38}{keyed_ratio or 0:9.2f}")
        figures.append(
            Figure(
                benchmark="worker_throughput",
                name=f"no-op {label} jobs, prefork concurrency {args.concurrency}, "
                f"{args.jobs} queued",
                value=round(keyed),
                unit="jobs/s",
                peer="the parallel no-op job, same runs",
                peer_value=round(rate),
                ratio_label="keyed / parallel",
                ratio=keyed_ratio,
                target="(context)",
                note=f"CPU of the process tree {keyed_cpu:.2f} vs {cpu:.2f} ms per message",
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
