"""Memory of the running processes: ``asanoha worker`` against a bare Celery worker with the
same concurrency on the same broker, and ``asanoha serve`` against a minimal FastAPI app
under uvicorn, each after it has done some work.

    .venv/bin/python bench/memory.py [--concurrency 2] [--jobs 50] [--database-url URL]
                                     [--broker-url redis://127.0.0.1:6379/0]

Read from ``/proc``: RSS of the main process and of every process below it (the prefork
children), and PSS, which divides each page shared between them (what the parent loaded
before forking) among its sharers and so shows what the sharing saves. The database is
created for the run and dropped at the end; every process started is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _processes import Memory, Started, memory_of, started, wait_for_output, wait_until
from _results import Figure, at_most, safe_ratio, write_figures
from asanoha import App, SessionUser, Settings
from asanoha.handlers.demo.features import notes
from asanoha.platform.http.auth import issue_token
from asanoha.platform.personal.master_keys import generate_master_key

DEMO_APP = "asanoha.handlers.demo.app:app"
WORKER_TARGET = 1.3
BENCH_DIR = Path(__file__).resolve().parent
EDITOR = SessionUser.of("editor-1", "tenant-a", ["Editor"])
HOST = "127.0.0.1"


def main(argv: list[str] | None = None) -> int:
    """Start each process in turn, give it work, read its memory, print the comparison."""
    args = parse_args(argv)
    measured: dict[str, Memory] = {}
    with scratch_database(args.database_url, "asanoha_bench_memory") as url:
        prefix = f"benchmem{uuid.uuid4().hex[:8]}"
        env = {
            "ASANOHA_DATABASE_URL": url,
            "ASANOHA_BROKER_URL": args.broker_url,
            "ASANOHA_QUEUE_PREFIX": prefix,
            "ASANOHA_JWT_SECRET": secrets.token_hex(32),
            # The notes hold personal data: the processes seal it, as in production.
            "ASANOHA_MASTER_KEY": generate_master_key(),
        }
        settings = Settings(
            database_url=url,
            broker_url=args.broker_url,
            queue_prefix=prefix,
            jwt_secret=env["ASANOHA_JWT_SECRET"],
            master_key=env["ASANOHA_MASTER_KEY"],
        )
        app = App([notes], settings=settings)
        try:
            app.create_schema()
            print(
                f"memory: {args.jobs} jobs / requests each, concurrency {args.concurrency}; "
                f"{describe_setup(url)}"
            )
            measured["asanoha worker"] = measure_asanoha_worker(app, env, args)
            measured["bare celery worker"] = measure_bare_worker(prefix, args)
            token = issue_token(settings, EDITOR)
            measured["asanoha serve"] = measure_asanoha_serve(env, token, args)
            measured["minimal fastapi"] = measure_minimal_api(url, args)
        finally:
            app.close()
    figures = print_report(measured, args)
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    parser.add_argument("--jobs", type=int, default=50, help="jobs / requests before measuring")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds idle before reading")
    parser.add_argument("--database-url", default=ADMIN_URL, help="admin URL (creates a db)")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


# -- workers --------------------------------------------------------------------------------


def measure_asanoha_worker(app: App, env: dict[str, str], args: argparse.Namespace) -> Memory:
    """``asanoha worker`` for the demo app, after running ``args.jobs`` demo jobs."""
    command = [sys.executable, "-m", "asanoha.cli", "worker", "--app", DEMO_APP]
    command += ["--concurrency", str(args.concurrency)]
    with started(command, env=env) as worker:
        wait_for_output(worker, " ready.")
        for n in range(args.jobs):
            # Each create triggers the demo's index-note job, which writes an index entry.
            app.service.dispatch_write(
                "notes:write:note:create", {"title": f"note {n}", "body": "a few words"}, EDITOR
            )
        wait_until(lambda: count_rows(app, "note_index") >= args.jobs, worker, "demo jobs")
        time.sleep(args.settle)
        return memory_of(worker.pid)


def measure_bare_worker(prefix: str, args: argparse.Namespace) -> Memory:
    """A bare ``celery worker`` (``_bare_celery.py``), after running ``args.jobs`` tasks."""
    queue = f"{prefix}.bare"
    key = f"{prefix}.bare.count"
    env = {"BENCH_BROKER_URL": args.broker_url, "BENCH_QUEUE": queue}
    command = [sys.executable, "-m", "celery", "-A", "_bare_celery", "worker"]
    command += [f"--concurrency={args.concurrency}", f"--queues={queue}", "--loglevel=INFO"]
    client = redis.Redis.from_url(args.broker_url)
    with started(command, env=env, cwd=str(BENCH_DIR)) as worker:
        wait_for_output(worker, " ready.")
        from _bare_celery import app as bare

        with bare.connection_for_write() as connection:
            for _ in range(args.jobs):
                bare.send_task("bench.count", args=[key], queue=queue, connection=connection)
        try:
            wait_until(lambda: int(client.get(key) or 0) >= args.jobs, worker, "bare tasks")
            time.sleep(args.settle)
            return memory_of(worker.pid)
        finally:
            client.delete(key)
            client.delete(queue)


# -- servers --------------------------------------------------------------------------------


def measure_asanoha_serve(env: dict[str, str], token: str, args: argparse.Namespace) -> Memory:
    """``asanoha serve`` for the demo app, after ``args.jobs`` creates over HTTP."""
    port = free_port()
    command = [sys.executable, "-m", "asanoha.cli", "serve", "--app", DEMO_APP]
    command += ["--host", HOST, "--port", str(port)]
    with started(command, env=env) as server:
        base = f"http://{HOST}:{port}"
        wait_until_answers(server, f"{base}/health")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            for n in range(args.jobs):
                answer = client.post(
                    "/api/write/notes:write:note:create", json={"title": f"served {n}"}
                )
                answer.raise_for_status()
        time.sleep(args.settle)
        return memory_of(server.pid)


def measure_minimal_api(url: str, args: argparse.Namespace) -> Memory:
    """A minimal FastAPI app (``_minimal_api.py``) under uvicorn, after as many creates."""
    from _common import create_raw_tables

    create_raw_tables(url)
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "_minimal_api:api", "--host", HOST]
    command += ["--port", str(port), "--log-level", "warning"]
    with started(command, env={"BENCH_DATABASE_URL": url}, cwd=str(BENCH_DIR)) as server:
        base = f"http://{HOST}:{port}"
        wait_until_answers(server, f"{base}/health")
        with httpx.Client(base_url=base, timeout=30) as client:
            for n in range(args.jobs):
                client.post("/notes", json={"title": f"served {n}", "amount": n}).raise_for_status()
        time.sleep(args.settle)
        return memory_of(server.pid)


# -- helpers --------------------------------------------------------------------------------


def count_rows(app: App, table: str) -> int:
    with psycopg.connect(conninfo(app.settings.database_url)) as conn:
        found = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(found[0]) if found else 0


def wait_until_answers(process: Started, health_url: str, timeout: float = 60) -> None:
    def answers() -> bool:
        with contextlib.suppress(httpx.TransportError):
            return httpx.get(health_url, timeout=1).status_code == 200
        return False

    wait_until(answers, process, health_url, timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


# -- report ---------------------------------------------------------------------------------


def print_report(measured: dict[str, Memory], args: argparse.Namespace) -> list[Figure]:
    print()
    print(f"{'MiB':<22}{'RSS main':>10}{'children':>10}{'RSS total':>11}{'PSS total':>11}")
    for name, memory in measured.items():
        print(
            f"{name:<22}{memory.main_rss:10.1f}{memory.children_rss:10.1f}"
            f"{memory.rss:11.1f}{memory.pss:11.1f}   ({memory.children} children, "
            f"{memory.children_uss:.1f} private)"
        )
    print()
    figures: list[Figure] = []
    pairs: list[tuple[str, str, str, Any]] = [
        ("asanoha worker", "bare celery worker", f"<= {WORKER_TARGET}", WORKER_TARGET),
        ("asanoha serve", "minimal fastapi", "(context)", None),
    ]
    for name, peer, target, bound in pairs:
        mine, theirs = measured[name], measured[peer]
        rss = safe_ratio(mine.rss, theirs.rss)
        pss = safe_ratio(mine.pss, theirs.pss)
        print(f"{name} / {peer}: RSS x{rss:.2f}, PSS x{pss:.2f}   target (RSS) {target}")
        label = f"{name}, concurrency {args.concurrency}" if "worker" in name else name
        figures.append(
            Figure(
                benchmark="memory",
                name=f"{label}: RSS main + children",
                value=round(mine.rss, 1),
                unit="MiB",
                peer=peer,
                peer_value=round(theirs.rss, 1),
                ratio_label="asanoha / peer",
                ratio=rss,
                target=target,
                target_met=at_most(rss, bound) if bound is not None else None,
                note=f"PSS {mine.pss:.0f} vs {theirs.pss:.0f} MiB (x{pss:.2f})",
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
