"""How a small fleet holds up as clients grow: ``asanoha serve --workers 2`` and two
``asanoha worker --concurrency 2`` under 16, then 64 client threads posting writes, each of
which starts a job that writes a row and appends an event that a consumer with four
partitions copies into a row (``_loaded_app.py``).

    .venv/bin/python bench/client_load.py [--clients 16 64] [--seconds 20] [--rounds 1]

For each client count, on a fresh database, after a warm-up: writes/s with p50 and p99 latency and errors;
the jobs and consumer copies done while the clients wrote; the backlog left when they
stopped and how long the fleet took to clear it; the longest the job lane and the consumers
queue got (sampled every 0.2 s). The peer is the same fleet at the fewest clients: the
ratio is writes/s at each count against it. Beside each figure, the CPU cores each group of
processes used (``_fleet_probe.py``), which says where the ceiling is.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _fleet_probe import Groups, Window, watching
from _loaded_app import POST_QN, feature
from _processes import Started, descendants, started, wait_for_output
from _results import Figure, safe_ratio, write_figures
from asanoha import App, Settings
from asanoha.platform.http.auth import issue_token
from asanoha.platform.model import SessionUser
from http_write import free_port, wait_until_up

BENCH_DIR = Path(__file__).resolve().parent
BROKER_URL = "redis://127.0.0.1:6379/0"
HOST = "127.0.0.1"
USER = SessionUser.of("load-user", "load-tenant", ["writer"])
API_PROCESSES = 2
WORKERS = 2
WORKER_CONCURRENCY = 2
CLIENT_PROCESSES = 2
#: Seconds the fleet may take to clear what the clients left.
SETTLE_TIMEOUT = 300.0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    secret = secrets.token_hex(32)
    print(f"client load on {os.cpu_count()} CPUs; {describe_setup(args.database_url)}")
    best: dict[int, Loaded] = {}
    for round_ in range(1, args.rounds + 1):
        for clients in args.clients:
            done = measure(clients, secret, args)
            if clients not in best or done.rate > best[clients].rate:
                best[clients] = done
            print(f"  round {round_}  {clients:>3} clients  {done.line()}", flush=True)
    write_figures(args.json, report(best, args))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="of writes per count")
    parser.add_argument("--rounds", type=int, default=1, help="each count's best is kept")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 and 4 clients, 1 s")
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates dbs)")
    parser.add_argument("--broker-url", default=BROKER_URL)
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    args.warm_up = max(2.0, args.seconds / 5)
    if args.quick:
        args.clients, args.seconds, args.rounds, args.warm_up = [2, 4], 1.0, 1, 1.0
    return args


@dataclass
class Loaded:
    """One client count's run."""

    writes: int
    errors: int
    seconds: float
    latencies: list[float]
    #: Jobs ended and consumer copies written while the clients wrote.
    jobs_during: int
    copies_during: int
    #: Left when the clients stopped: job rows not ended, events not copied.
    jobs_left: int
    copies_left: int
    settle_seconds: float
    longest: dict[str, int]
    window: Window
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.writes / self.seconds if self.seconds else 0.0

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000

    def line(self) -> str:
        queues = ", ".join(f"{name} {n}" for name, n in self.longest.items())
        return (
            f"{self.rate:6.1f} writes/s, p50 {self.percentile(0.5):.0f} ms, p99 "
            f"{self.percentile(0.99):.0f} ms, {self.errors} errors; during: "
            f"{self.jobs_during / self.seconds:.1f} jobs/s, "
            f"{self.copies_during / self.seconds:.1f} copies/s; left {self.jobs_left} jobs, "
            f"{self.copies_left} copies, cleared in {self.settle_seconds:.1f} s; longest "
            f"queues: {queues}; {self.window.summary()}; cores used: {self.cores()}"
        )

    def cores(self) -> str:
        window = self.window
        used = [f"{name} {window.per_second(cpu):.2f}" for name, cpu in window.cpu.items()]
        return ", ".join([*used, f"Postgres {window.per_second(window.postgres):.2f}"])


def measure(clients: int, secret: str, args: argparse.Namespace) -> Loaded:
    prefix = f"asanoha-load-{secrets.token_hex(4)}"
    with scratch_database(args.database_url, "asanoha_bench_load") as url:
        settings = Settings(
            database_url=url, broker_url=args.broker_url, queue_prefix=prefix, jwt_secret=secret
        )
        app = App([feature], settings)
        try:
            app.create_schema()
            token = issue_token(settings, USER)
        finally:
            app.close()
        env = {
            "ASANOHA_DATABASE_URL": url,
            "ASANOHA_BROKER_URL": args.broker_url,
            "ASANOHA_QUEUE_PREFIX": prefix,
            "ASANOHA_JWT_SECRET": secret,
            "ASANOHA_LOG_FORMAT": "text",
            "PYTHONPATH": str(BENCH_DIR),
        }
        try:
            with fleet(env) as (base_url, api, workers):
                counts = Counts(url)

                def groups() -> Groups:
                    return {
                        "API": [api.pid, *descendants(api.pid)],
                        "workers": [pid for w in workers for pid in (w.pid, *descendants(w.pid))],
                    }

                # Every API process, connection pool and worker warmed up first.
                run_clients(base_url, token, clients, args.warm_up)
                counts.settle()
                before = counts.read()
                with sampling(args.broker_url, prefix) as longest:
                    with watching(url, groups) as window:
                        writes, errors, seconds, latencies = run_clients(
                            base_url, token, clients, args.seconds
                        )
                    after = counts.read()
                    settle = counts.settle()
                return Loaded(
                    writes=writes,
                    errors=errors,
                    seconds=seconds,
                    latencies=latencies,
                    jobs_during=after.jobs - before.jobs,
                    copies_during=after.copies - before.copies,
                    jobs_left=after.posts - after.jobs,
                    copies_left=after.posts - after.copies,
                    settle_seconds=settle,
                    longest=dict(longest),
                    window=window,
                )
        finally:
            client = redis.Redis.from_url(args.broker_url)
            keys = list(client.scan_iter(match=f"{prefix}*"))
            if keys:
                client.delete(*keys)


@contextmanager
def fleet(env: dict[str, str]) -> Iterator[tuple[str, Started, list[Started]]]:
    """The API (``serve --workers 2``) and the workers: the API's URL, its process, the
    workers' processes."""
    port = free_port()
    serve = [sys.executable, "-m", "asanoha.cli", "serve", "--app", "_loaded_app:app"]
    serve += ["--host", HOST, "--port", str(port), "--workers", str(API_PROCESSES)]
    worker = [sys.executable, "-m", "asanoha.cli", "worker", "--app", "_loaded_app:app"]
    worker += ["--concurrency", str(WORKER_CONCURRENCY), "--loglevel", "INFO"]
    with ExitStack() as stack:
        api = stack.enter_context(started(serve, env=env, cwd=str(BENCH_DIR)))
        workers = [
            stack.enter_context(started(worker, env=env, cwd=str(BENCH_DIR)))
            for _ in range(WORKERS)
        ]
        base_url = f"http://{HOST}:{port}"
        wait_until_up(api.process, f"{base_url}/health")
        for started_worker in workers:
            wait_for_output(started_worker, "ready", timeout=60)
        yield base_url, api, workers


@dataclass(frozen=True)
class Count:
    posts: int
    jobs: int
    copies: int


class Counts:
    """Rows in the application's tables: what was written, done by jobs, copied."""

    def __init__(self, url: str) -> None:
        self._conninfo = conninfo(url)

    def read(self) -> Count:
        with psycopg.connect(self._conninfo) as conn:
            found = conn.execute(
                "SELECT (SELECT count(*) FROM loaded_notes), (SELECT count(*) FROM loaded_marks),"
                " (SELECT count(*) FROM loaded_copies)"
            ).fetchone()
        assert found is not None
        return Count(*found)

    def settle(self) -> float:
        """Seconds until every post has its job's row and its copy."""
        started_at = time.monotonic()
        while True:
            now = self.read()
            if now.jobs >= now.posts and now.copies >= now.posts:
                return time.monotonic() - started_at
            if time.monotonic() - started_at > SETTLE_TIMEOUT:
                raise RuntimeError(f"not cleared within {SETTLE_TIMEOUT:.0f} s: {now}")
            time.sleep(0.2)


@contextmanager
def sampling(broker_url: str, prefix: str) -> Iterator[dict[str, int]]:
    """The longest each queue of ``prefix`` got while the block ran (sampled every 0.2 s)."""
    client = redis.Redis.from_url(broker_url)
    names = {"job lane": f"{prefix}.worker", "consumers": f"{prefix}.consumers"}
    longest = dict.fromkeys(names, 0)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            for label, queue in names.items():
                longest[label] = max(longest[label], int(client.llen(queue)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield longest
    finally:
        stop.set()
        thread.join()


def run_clients(
    base_url: str, token: str, clients: int, seconds: float
) -> tuple[int, int, float, list[float]]:
    """``clients`` threads over ``CLIENT_PROCESSES`` processes posting for ``seconds``:
    (writes answered 200, errors, seconds, each write's latency)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = context.Event()
    host, port = base_url.removeprefix("http://").split(":")
    per = [clients // CLIENT_PROCESSES + (i < clients % CLIENT_PROCESSES) for i in range(2)]
    processes = [
        context.Process(
            target=client_process,
            args=(host, int(port), token, threads, seconds, index, start, results),
            daemon=True,
        )
        for index, threads in enumerate(per)
        if threads
    ]
    for process in processes:
        process.start()
    start.set()
    found = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(timeout=10)
    failed = [f for f in found if isinstance(f, str)]
    if failed:
        raise RuntimeError(f"a client failed: {failed[0]}")
    writes = sum(f[0] for f in found)
    errors = sum(f[1] for f in found)
    latencies = [latency for f in found for latency in f[3]]
    return writes, errors, max(f[2] for f in found), latencies


def client_process(
    host: str,
    port: int,
    token: str,
    threads: int,
    seconds: float,
    index: int,
    start: Any,
    results: Any,
) -> None:
    """Threads posting writes over keep-alive connections until ``seconds`` passed; put
    (answered, errors, seconds, latencies) on ``results`` (or the error's text)."""
    try:
        start.wait()
        results.put(_post_for(host, port, token, threads, seconds, index))
    except Exception as error:  # the parent reports it
        results.put(f"{type(error).__name__}: {error}")


def _post_for(
    host: str, port: int, token: str, threads: int, seconds: float, index: int
) -> tuple[int, int, float, list[float]]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    path = f"/api/write/{POST_QN}"
    answered = [0] * threads
    errors = [0] * threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    began = time.monotonic()
    deadline = began + seconds

    def loop(thread: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        n = 0
        while time.monotonic() < deadline:
            body = json.dumps({"title": f"p{index}-{thread}-{n}", "amount": n})
            sent = time.monotonic()
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=60)
                ok = False
            latencies[thread].append(time.monotonic() - sent)
            if ok:
                answered[thread] += 1
            else:
                errors[thread] += 1
            n += 1
        conn.close()

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (
        sum(answered),
        sum(errors),
        time.monotonic() - began,
        [latency for per in latencies for latency in per],
    )


def report(best: dict[int, Loaded], args: argparse.Namespace) -> list[Figure]:
    fewest = min(best)
    base = best[fewest]
    print()
    print(f"writes/s against {fewest} clients (best of {args.rounds} round(s)):")
    figures = []
    for clients in sorted(best):
        done = best[clients]
        ratio = safe_ratio(done.rate, base.rate)
        print(f"  {clients:>3} clients  {ratio or 0:5.2f}x  {done.line()}")
        figures.append(
            Figure(
                benchmark="client_load",
                name=(
                    f"writes starting a job and a consumer copy, {clients} clients, serve "
                    f"--workers {API_PROCESSES}, {WORKERS} workers x {WORKER_CONCURRENCY}"
                ),
                value=round(done.rate, 1),
                unit="writes/s",
                peer=f"the same at {fewest} clients",
                peer_value=round(base.rate, 1),
                ratio_label=f"N / {fewest}",
                ratio=ratio,
                target="(curve)",
                note=done.line(),
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
