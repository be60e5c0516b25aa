"""A workflow's fan-out/fan-in on the worker processes an operator runs: against the same
no-op jobs dispatched plainly, and against Celery's own ``chord`` with a Redis result backend.

    .venv/bin/python bench/workflows.py [--items 1000] [--concurrency 2] [--repeat 3]
                                        [--broker-url redis://127.0.0.1:6379/0]
                                        [--backend-url redis://127.0.0.1:6379/0]

Three sides, each on a worker of its own with the same prefork concurrency:

- workflow: one run of a declared workflow (``_workflow_jobs.py``) whose first step hands
  the item count to a step with ``map=``, which fans out to ``--items`` no-op job rows, then
  a no-op fan-in step, on ``asanoha worker``. The declared form is the direct reading of a
  fan-out/fan-in: one run, whose fan-out the worker places in the transaction that ends the
  step before it, and whose fan-in the end of the last item starts.
- plain: the same number of no-op jobs, each through ``dispatch_job`` (a job row each), on
  ``asanoha worker``, as ``worker_throughput.py`` queues them.
- chord: ``chord([noop] * items, done)`` on a bare ``celery worker`` (``_chord_celery.py``),
  the members' results and the chord's counter in Redis (``--backend-url``, under the run's
  prefix, deleted after it).

The same clock on every side: the work is sent before its worker starts (the run started,
the jobs dispatched, the chord applied), so neither the worker's start-up nor the client's
sending counts; the clock runs from the start of the side's first task (the workflow's
first step, the first job, the first member) to the end of its last (the fan-in step, the
last job, the chord's body), both stamped by the worker with the same hook (``_stamps.py``).
So the workflow's fan-out (placing and publishing its rows) is counted, as the worker does
it, and Celery's (sent by the client) is not. Throughput is items per second over that
span; the CPU per item is that of the worker's process tree (not Postgres's or Redis's) from
the first start seen to the last end. The sides alternate ``--repeat`` times; medians.
Targets: workflow / plain >= 0.7; workflow / chord is context, the goal being above 1.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis
from celery import chord

from _chord_celery import BODY, MEMBER, make_app
from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _processes import started, tree_cpu, wait_until
from _results import Figure, at_least, safe_ratio, write_figures
from _stamps import STAMPS_ENV, STARTS_ENV, read_stamps
from _workflow_jobs import FAN_IN, FIRST_STEP, NOOP, WORKFLOW, feature
from asanoha import App, Settings
from asanoha.workers import dispatch_job

TARGET = 0.7
BENCH_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Run:
    """One side's run: items per second from the first task's start to the last task's end."""

    items: int
    seconds: float
    #: Seconds the client took to send the work (before the worker started; not counted).
    sending: float
    #: CPU of the worker's process tree per item, over the same span.
    cpu_ms: float

    @property
    def rate(self) -> float:
        return self.items / self.seconds


@dataclass(frozen=True)
class Worker:
    """A side's worker: its command and environment, and the end stamps its run counts
    (one for a run or a chord, one per item for plain jobs)."""

    command: list[str]
    env: dict[str, str]
    ends: int


def main(argv: list[str] | None = None) -> int:
    """Alternate the chord, the plain jobs and the workflow ``--repeat`` times and print the
    medians."""
    args = parse_args(argv)
    chords: list[Run] = []
    plains: list[Run] = []
    flows: list[Run] = []
    with scratch_database(args.database_url, "asanoha_bench_workflows") as url:
        print(
            f"workflows: {args.items} no-op items per run, prefork concurrency "
            f"{args.concurrency}, broker {args.broker_url}, chord results in "
            f"{args.backend_url}; {describe_setup(url)}"
        )
        for _ in range(args.repeat):
            chords.append(run_chord(args))
            plains.append(run_plain(url, args))
            flows.append(run_workflow(url, args))
    figures = report(flows, plains, chords, args)
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000, help="items of the fan-out")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per side")
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates a db)")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--backend-url",
        default="redis://127.0.0.1:6379/0",
        help="the chord's Redis result backend (the URL's path is its database number)",
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


# -- the sides ------------------------------------------------------------------------------


def run_workflow(url: str, args: argparse.Namespace) -> Run:
    """One run of the fan-out/fan-in workflow on ``asanoha worker``."""
    with _asanoha_app(url, args) as (app, prefix):
        began = time.monotonic()
        run_id = app.workflows.start(WORKFLOW, {"items": args.items})
        sending = time.monotonic() - began
        env = _asanoha_env(app, prefix, first=FIRST_STEP, last=FAN_IN)
        run = _measure(Worker(_asanoha_worker(args), env, 1), args, sending)
        measured = app.workflows.get(run_id)
        items = len(measured.steps["noop"].items) if "noop" in measured.steps else 0
        if measured.state != "succeeded" or items != args.items:
            raise RuntimeError(f"workflow run {measured.state} with {items} of {args.items} items")
        return run


def run_plain(url: str, args: argparse.Namespace) -> Run:
    """``--items`` no-op jobs dispatched one by one, then ``asanoha worker`` on them."""
    with _asanoha_app(url, args) as (app, prefix):
        succeeded_sql = f"SELECT count(*) FROM asanoha_job_runs WHERE status = 'succeeded' AND job_qn = '{NOOP}'"
        before = _count(url, succeeded_sql)
        began = time.monotonic()
        for _ in range(args.items):
            dispatch_job(app, NOOP, {})
        sending = time.monotonic() - began
        env = _asanoha_env(app, prefix, first=NOOP, last=NOOP)
        run = _measure(Worker(_asanoha_worker(args), env, args.items), args, sending)
        succeeded = _count(url, succeeded_sql) - before
        if succeeded != args.items:
            raise RuntimeError(f"{succeeded} of {args.items} jobs recorded as succeeded")
        return run


def run_chord(args: argparse.Namespace) -> Run:
    """Celery's ``chord`` of ``--items`` no-op tasks and a no-op body on a bare worker."""
    queue = f"benchwf{uuid.uuid4().hex[:8]}.chord"
    peer = make_app(args.broker_url, args.backend_url, queue)
    command = [sys.executable, "-m", "celery", "-A", "_chord_celery", "worker"]
    command += [f"--concurrency={args.concurrency}", f"--queues={queue}", "--loglevel=WARNING"]
    env = {
        "BENCH_BROKER_URL": args.broker_url,
        "BENCH_BACKEND_URL": args.backend_url,
        "BENCH_QUEUE": queue,
    }
    try:
        began = time.monotonic()
        chord([peer.signature(MEMBER) for _ in range(args.items)], app=peer)(peer.signature(BODY))
        sending = time.monotonic() - began
        return _measure(Worker(command, env, 1), args, sending)
    finally:
        peer.close()
        # The queue and its exchange's binding (broker), the results and the chord's counter
        # (backend): all named after the queue.
        _drop_keys(args.broker_url, f"{queue}*", f"_kombu.binding*.{queue}")
        _drop_keys(args.backend_url, f"{queue}*")


@contextmanager
def _asanoha_app(url: str, args: argparse.Namespace) -> Iterator[tuple[App, str]]:
    """The client's application on a queue prefix of its own; the queues dropped after."""
    prefix = f"benchwf{uuid.uuid4().hex[:8]}"
    settings = Settings(
        database_url=url,
        broker_url=args.broker_url,
        queue_prefix=prefix,
        jwt_secret=secrets.token_hex(32),
    )
    app = App([feature], settings=settings)
    try:
        app.create_schema()
        yield app, prefix
    finally:
        app.close()
        _drop_keys(args.broker_url, f"{prefix}.*", f"_kombu.binding*.{prefix}.*")


def _asanoha_worker(args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", "_workflow_app:app"]
    return [*command, "--concurrency", str(args.concurrency), "--loglevel", "WARNING"]


def _asanoha_env(app: App, prefix: str, *, first: str, last: str) -> dict[str, str]:
    """The worker's settings, and the jobs whose starts and ends ``_workflow_app`` stamps."""
    settings = app.settings
    return {
        "ASANOHA_DATABASE_URL": settings.database_url,
        "ASANOHA_BROKER_URL": settings.broker_url,
        "ASANOHA_QUEUE_PREFIX": prefix,
        "ASANOHA_JWT_SECRET": settings.jwt_secret,
        "BENCH_FIRST_JOB": first,
        "BENCH_JOB": last,
    }


def _measure(worker: Worker, args: argparse.Namespace, sending: float) -> Run:
    """Start the worker on the work sent to it; the span from the first start stamp to the
    last end stamp, and the CPU the worker's tree used meanwhile."""
    with tempfile.TemporaryDirectory(prefix="asanoha-bench-stamps-") as folder:
        starts, ends = Path(folder) / "starts", Path(folder) / "ends"
        env = {**worker.env, STARTS_ENV: str(starts), STAMPS_ENV: str(ends)}
        with started(worker.command, env=env, cwd=str(BENCH_DIR)) as process:
            # Logging at WARNING (no line per task): the first start says it is working.
            wait_until(starts.exists, process, "the first task", timeout=120)
            cpu_at_start = tree_cpu(process.pid)
            wait_until(
                lambda: len(read_stamps(ends)) >= worker.ends,
                process,
                "the last task",
                timeout=max(120.0, args.items / 10),
            )
            cpu = tree_cpu(process.pid) - cpu_at_start
        first, last = read_stamps(starts)[0], read_stamps(ends)[-1]
    return Run(args.items, last - first, sending, 1000 * cpu / args.items)


def _count(url: str, sql: str) -> int:
    with psycopg.connect(conninfo(url)) as conn:
        found = conn.execute(sql).fetchone()
    return int(found[0]) if found else 0


def _drop_keys(redis_url: str, *patterns: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = [key for pattern in patterns for key in client.scan_iter(match=pattern)]
    if keys:
        client.delete(*keys)


# -- the report -----------------------------------------------------------------------------


def report(
    flows: list[Run], plains: list[Run], chords: list[Run], args: argparse.Namespace
) -> list[Figure]:
    """Print each side's runs and medians, and the ratios; the figures for ``run_all.py``."""
    sides = [
        ("celery chord, redis results", chords),
        ("asanoha plain jobs", plains),
        ("asanoha workflow fan-out/fan-in", flows),
    ]
    for name, runs in sides:
        listed = ", ".join(f"{r.rate:.0f}" for r in runs)
        sending = statistics.median(r.sending for r in runs)
        cpu_ms = statistics.median(r.cpu_ms for r in runs)
        print(
            f"{name:<34}{_rate(runs):9.0f} items/s   (runs: {listed}; {cpu_ms:.2f} ms worker "
            f"CPU per item; sent in {sending:.2f} s before the worker started)"
        )
    rate, plain, peer = _rate(flows), _rate(plains), _rate(chords)
    to_plain, to_chord = safe_ratio(rate, plain), safe_ratio(rate, peer)
    print(f"{'ratio workflow / plain':<34}{to_plain or 0:9.2f}   (target >= {TARGET})")
    print(f"{'ratio workflow / celery chord':<34}{to_chord or 0:9.2f}   (goal > 1)")
    cpu = statistics.median(r.cpu_ms for r in flows)
    name = f"fan-out/fan-in of {args.items} no-op steps, prefork concurrency {args.concurrency}"
    return [
        Figure(
            benchmark="workflows",
            name=name,
            value=round(rate),
            unit="items/s",
            peer="the same no-op jobs dispatched plainly, same worker",
            peer_value=round(plain),
            ratio_label="workflow / plain",
            ratio=to_plain,
            target=f">= {TARGET}",
            target_met=at_least(to_plain, TARGET),
            note=f"first task's start to last task's end; worker CPU {cpu:.2f} vs "
            f"{statistics.median(r.cpu_ms for r in plains):.2f} ms per item",
        ),
        Figure(
            benchmark="workflows",
            name=name,
            value=round(rate),
            unit="items/s",
            peer="Celery chord, Redis result backend, bare celery worker",
            peer_value=round(peer),
            ratio_label="workflow / chord",
            ratio=to_chord,
            target="(context: goal > 1)",
            note=f"first member's start to the body's end; worker CPU {cpu:.2f} vs "
            f"{statistics.median(r.cpu_ms for r in chords):.2f} ms per item",
        ),
    ]


def _rate(runs: list[Run]) -> float:
    return statistics.median(r.rate for r in runs)


if __name__ == "__main__":
    sys.exit(main())
