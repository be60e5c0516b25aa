"""HTTP create throughput: asanoha's ``POST /api/write/{qn}`` against a minimal FastAPI
endpoint that does the same inserts with raw SQL, both served by uvicorn with 1 and with 2
API processes, in one run.

    .venv/bin/python bench/http_write.py [--seconds 3 | --requests N] [--workers 8]
                                         [--processes 1 2] [--database-url URL]

asanoha runs as ``asanoha serve --workers N``; the peer as ``uvicorn --workers N`` with its
app factory. Every server runs on loopback against the same database; one httpx client with
a connection pool drives one server at a time from ``--workers`` threads with the same JWT,
alternating for ``--rounds`` rounds. The database is dropped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import jwt
import psycopg
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    Throughput,
    Work,
    bench_feature,
    conninfo,
    create_raw_tables,
    describe_setup,
    note_payload,
    run_threads,
    scratch_database,
    warm_up_seconds,
    write_raw,
)
from _processes import descendants
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import App, SessionUser, Settings
from asanoha.platform.http.auth import issue_token

TARGET = 0.7
HOST = "127.0.0.1"
PATH = f"/api/write/{CREATE_QN}"
SERVERS = ("asanoha", "raw")
PROCESS_COUNTS = (1, 2)
BENCH_DIR = Path(__file__).resolve().parent
#: Where each server writes its rows, to check that every answered request wrote one.
ROW_TABLES = {"asanoha": "bench_notes", "raw": "raw_notes"}
SECRET_VARIABLE = "ASANOHA_JWT_SECRET"


def main(argv: list[str] | None = None) -> int:
    """Serve each app in turn, drive it, and print both rates and the ratio."""
    args = parse_args(argv)
    # Both servers and the token share one secret; Settings reads it from the environment.
    os.environ[SECRET_VARIABLE] = secrets.token_hex(32)
    results: dict[tuple[str, int], Throughput] = {}
    sent = dict.fromkeys(SERVERS, 0)
    targets = [(server, n) for n in args.processes for server in SERVERS]
    with scratch_database(args.database_url, "asanoha_bench_http") as url, ExitStack() as stack:
        app = App(features=[bench_feature()], settings=Settings(database_url=url))
        try:
            app.create_schema()
            token = issue_token(app.settings, USER)
        finally:
            app.close()
        create_raw_tables(url)
        amount = f"{args.requests} requests" if args.requests else f"{args.seconds:g} s"
        print(f"HTTP create, {amount} per measurement; {describe_setup(url)}")
        running = {
            target: stack.enter_context(running_server(*target, url, args.workers))
            for target in targets
        }
        for target in targets:
            sent[target[0]] += measure(running[target].base_url, token, args, warm_up=True).calls
        # Alternate the servers round by round, so that a change in the machine's load
        # affects all; keep each one's best round.
        for round_ in range(1, args.rounds + 1):
            for target in targets:
                server, processes = target
                cpu_before = running[target].cpu_seconds()
                result = measure(running[target].base_url, token, args, warm_up=False)
                # The servers' CPU, not the client's: what one request costs the server.
                result = replace(result, cpu_seconds=running[target].cpu_seconds() - cpu_before)
                sent[server] += result.calls
                if target not in results or result.rate > results[target].rate:
                    results[target] = result
                print(
                    f"  round {round_}  {server:<8} x{processes} {result.rate:8.0f} requests/s, "
                    f"server CPU {result.cpu_ms_per_call:.2f} ms/request"
                )
        stack.close()
        for server in SERVERS:
            check_rows(url, ROW_TABLES[server], sent[server])
    write_figures(args.json, print_report(results, args))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    amount.add_argument("--requests", type=int, help="per measurement, instead of --seconds")
    parser.add_argument("--workers", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per server; best kept")
    parser.add_argument(
        "--database-url",
        default=ADMIN_URL,
        help="admin URL used to create and drop the bench database",
    )
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=list(PROCESS_COUNTS),
        help="API process counts to compare (uvicorn workers of each server)",
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


# -- client ---------------------------------------------------------------------------------


def measure(base_url: str, token: str, args: argparse.Namespace, *, warm_up: bool) -> Throughput:
    """Drive ``PATH`` from ``args.workers`` threads sharing one pooled httpx client."""
    limits = httpx.Limits(max_connections=args.workers, max_keepalive_connections=args.workers)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, limits=limits, timeout=30) as client:

        @contextmanager
        def worker() -> Iterator[Work]:
            yield lambda n: post(client, note_payload(n))

        if args.requests is not None:
            calls = max(args.workers * 20, args.requests // 10) if warm_up else args.requests
            return run_threads(worker, args.workers, seconds=0, calls=calls)
        seconds = warm_up_seconds(args.seconds) if warm_up else args.seconds
        return run_threads(worker, args.workers, seconds=seconds)


def post(client: httpx.Client, payload: dict[str, Any]) -> None:
    response = client.post(PATH, json=payload)
    if response.status_code != 200:
        raise RuntimeError(f"{client.base_url}{PATH}: {response.status_code} {response.text[:300]}")


def check_rows(url: str, table: str, sent: int) -> None:
    """Every answered create wrote exactly one row: the servers did the work they claim."""
    with psycopg.connect(conninfo(url)) as conn:
        found = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    rows = found[0] if found else 0
    if rows != sent:
        raise RuntimeError(f"{table}: {rows} rows after {sent} answered creates")


# -- servers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """A server process the run started."""

    base_url: str
    pid: int

    def cpu_seconds(self) -> float:
        """CPU time the server's processes have used so far (Linux ``/proc``; 0 elsewhere)."""
        total = 0.0
        for pid in (self.pid, *descendants(self.pid)):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # utime and stime, fields 14 and 15 of stat(5), counted after the ")" of the name.
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


@contextmanager
def running_server(server: str, processes: int, url: str, workers: int) -> Iterator[Server]:
    """Start ``server`` with ``processes`` API processes, wait until it answers, stop it after."""
    port = free_port()
    # Each API process gets a connection pool as large as the client's concurrency.
    env = {
        **os.environ,
        "ASANOHA_DATABASE_URL": url,
        "ASANOHA_DATABASE_POOL_SIZE": str(workers),
        "BENCH_DATABASE_URL": url,
        "BENCH_POOL_SIZE": str(workers),
    }
    where = ["--host", HOST, "--port", str(port), "--workers", str(processes)]
    if server == "asanoha":
        command = [sys.executable, "-m", "asanoha.cli", "serve", "--app", "_apps:bench_app"]
        command += where
    elif processes == 1:
        # uvicorn's defaults, as asanoha serve keeps them (an access log line per request).
        command = [sys.executable, "-m", "uvicorn", "--factory", "http_write:raw_app_from_env"]
        command += where
    else:
        # The same supervisor and listener as asanoha serve --workers N (plain uvicorn
        # --workers N leaves Nagle's algorithm on: ~40 ms per keep-alive request).
        launch = (
            "from asanoha.cli.api_workers import run_api_workers; "
            f"run_api_workers('http_write:raw_app_from_env', host={HOST!r}, port={port}, "
            f"workers={processes})"
        )
        command = [sys.executable, "-c", launch]
    process = subprocess.Popen(
        command,
        env=env,
        cwd=BENCH_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base_url = f"http://{HOST}:{port}"
        wait_until_up(process, f"{base_url}/health")
        yield Server(base_url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_up(process: subprocess.Popen[bytes], health_url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before answering")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(health_url, timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{health_url} did not answer within {timeout:.0f} s")


def raw_app_from_env() -> FastAPI:
    """The peer app, for ``uvicorn --factory`` (each worker process builds its own)."""
    url = os.environ["BENCH_DATABASE_URL"]
    return raw_http_app(url, Settings().jwt_secret, int(os.environ.get("BENCH_POOL_SIZE", "8")))


class NoteIn(BaseModel):
    """The create payload of the minimal endpoint."""

    title: str
    amount: int | None = None


class ConnectionPool:
    """Just enough of a pool: at most ``size`` psycopg connections, opened on demand."""

    def __init__(self, url: str, size: int) -> None:
        self._conninfo = conninfo(url)
        self._idle: queue.LifoQueue[psycopg.Connection[Any]] = queue.LifoQueue()
        self._slots = queue.Queue[None]()
        for _ in range(size):
            self._slots.put(None)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        self._slots.get()
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = psycopg.connect(self._conninfo)
            yield conn
            self._idle.put(conn)
        finally:
            self._slots.put(None)


def raw_http_app(url: str, secret: str, pool_size: int) -> FastAPI:
    """The peer: one endpoint that checks the token and the role and inserts by hand."""
    pool = ConnectionPool(url, pool_size)
    api = FastAPI()

    @api.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    # A plain ``def``: FastAPI runs it in its threadpool, as asanoha runs its handlers.
    @api.post(PATH)
    def create(payload: NoteIn, authorization: str = Header()) -> dict[str, Any]:
        try:
            claims = jwt.decode(authorization.removeprefix("Bearer "), secret, algorithms=["HS256"])
        except jwt.InvalidTokenError as error:
            raise HTTPException(401, str(error)) from None
        user = SessionUser.of(claims["sub"], claims["tenant"], claims.get("roles", []))
        if "writer" not in user.roles:
            raise HTTPException(403, "role writer required")
        with pool.connection() as conn:
            row = write_raw(conn, payload.model_dump(), user)
        return {"isSuccess": True, "data": row}

    return api


# -- report ---------------------------------------------------------------------------------


def print_report(
    results: dict[tuple[str, int], Throughput], args: argparse.Namespace
) -> list[Figure]:
    print()
    print(
        f"requests/s with {args.workers} client threads (one pooled httpx client), "
        f"best of {args.rounds} round(s)"
    )
    labels = {"asanoha": "asanoha serve", "raw": "minimal FastAPI + raw psycopg"}
    for (server, processes), result in results.items():
        print(
            f"  {f'{labels[server]}, {processes} process(es)':<44}{result.rate:8.0f}   "
            f"({result.calls} in {result.seconds:.1f} s; "
            f"server CPU {result.cpu_ms_per_call:.2f} ms/request)"
        )
    figures = []
    for processes in args.processes:
        mine, peer = results.get(("asanoha", processes)), results.get(("raw", processes))
        if mine is None or peer is None:
            continue
        ratio = safe_ratio(mine.rate, peer.rate)
        if ratio is not None:
            print(
                f"  {f'asanoha / minimal, {processes} process(es)':<44}{ratio:8.2f}   "
                f"target >= {TARGET}"
            )
        figures.append(
            Figure(
                benchmark="http_write",
                name=f"HTTP create, {processes} API process(es), {args.workers} client threads",
                value=round(mine.rate),
                unit="requests/s",
                peer="minimal FastAPI + raw psycopg, same process count",
                peer_value=round(peer.rate),
                ratio_label="asanoha / peer",
                ratio=ratio,
                target=f">= {TARGET}",
                target_met=at_least(ratio, TARGET),
                note=(
                    f"server CPU {mine.cpu_ms_per_call:.2f} vs "
                    f"{peer.cpu_ms_per_call:.2f} ms/request"
                ),
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
