"""HTTP create throughput: asanoha's ``POST /api/write/{qn}`` against a minimal FastAPI
endpoint that does the same inserts with raw SQL, both served by uvicorn, in one run.

    .venv/bin/python bench/http_write.py [--seconds 3 | --requests N] [--workers 8]
                                         [--database-url URL]

Each server runs in its own process (its own interpreter lock) on loopback, against the same
database; one httpx client with a connection pool drives one server at a time from
``--workers`` threads with the same JWT, alternating for ``--rounds`` rounds. The database is
dropped at the end, also on failure.
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
from asanoha import App, SessionUser, Settings
from asanoha.platform.http.auth import issue_token

TARGET = 0.7
HOST = "127.0.0.1"
PATH = f"/api/write/{CREATE_QN}"
SERVERS = ("asanoha", "raw")
#: Where each server writes its rows, to check that every answered request wrote one.
ROW_TABLES = {"asanoha": "bench_notes", "raw": "raw_notes"}
SECRET_VARIABLE = "ASANOHA_JWT_SECRET"


def main(argv: list[str] | None = None) -> int:
    """Serve each app in turn, drive it, and print both rates and the ratio."""
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.url, args.port, args.pool_size)
        return 0
    # Both servers and the token share one secret; Settings reads it from the environment.
    os.environ[SECRET_VARIABLE] = secrets.token_hex(32)
    results: dict[str, Throughput] = {}
    sent = dict.fromkeys(SERVERS, 0)
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
            server: stack.enter_context(running_server(server, url, args.workers))
            for server in SERVERS
        }
        for server in SERVERS:
            sent[server] += measure(running[server].base_url, token, args, warm_up=True).calls
        # Alternate the servers round by round, so that a change in the machine's load
        # affects both; keep each one's best round.
        for round_ in range(1, args.rounds + 1):
            for server in SERVERS:
                cpu_before = running[server].cpu_seconds()
                result = measure(running[server].base_url, token, args, warm_up=False)
                # The server's CPU, not the client's: what one request costs the server.
                result = replace(result, cpu_seconds=running[server].cpu_seconds() - cpu_before)
                sent[server] += result.calls
                if server not in results or result.rate > results[server].rate:
                    results[server] = result
                print(
                    f"  round {round_}  {server:<8} {result.rate:8.0f} requests/s, "
                    f"server CPU {result.cpu_ms_per_call:.2f} ms/request"
                )
        stack.close()
        for server in SERVERS:
            check_rows(url, ROW_TABLES[server], sent[server])
    print_report(results, args)
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
    # The server side of the run: this script started again in a child process.
    parser.add_argument("--serve", choices=SERVERS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pool-size", type=int, default=8, help=argparse.SUPPRESS)
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
        """CPU time the process has used so far (Linux ``/proc``; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        # utime and stime, fields 14 and 15 of stat(5), counted after the ")" of the name.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running_server(server: str, url: str, workers: int) -> Iterator[Server]:
    """Start ``server`` in a child process, wait until it answers, stop it afterwards."""
    port = free_port()
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        *("--serve", server, "--url", url, "--port", str(port)),
        *("--pool-size", str(workers)),
    ]
    process = subprocess.Popen(command)
    try:
        base_url = f"http://{HOST}:{port}"
        wait_until_up(process, f"{base_url}/health")
        yield Server(base_url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
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


def serve(server: str, url: str, port: int, pool_size: int) -> None:
    """Run one server until terminated (the child process side)."""
    import uvicorn

    if server == "asanoha":
        # The connection pool at least as large as the client's concurrency.
        settings = Settings(database_url=url, database_pool_size=pool_size)
        api = App(features=[bench_feature()], settings=settings).http
    else:
        api = raw_http_app(url, Settings().jwt_secret, pool_size)
    uvicorn.run(api, host=HOST, port=port, log_level="warning", access_log=False)


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


def print_report(results: dict[str, Throughput], args: argparse.Namespace) -> None:
    print()
    print(
        f"requests/s with {args.workers} client threads (one pooled httpx client), "
        f"best of {args.rounds} round(s)"
    )
    labels = {"asanoha": "asanoha POST /api/write/{qn}", "raw": "minimal FastAPI + raw psycopg"}
    for server, result in results.items():
        print(
            f"  {labels[server]:<32}{result.rate:8.0f}   ({result.calls} in {result.seconds:.1f} s;"
            f" server CPU {result.cpu_ms_per_call:.2f} ms/request)"
        )
    if results.get("raw") and results["raw"].rate:
        ratio = results["asanoha"].rate / results["raw"].rate
        print(f"  {'asanoha / minimal':<32}{ratio:8.2f}   target >= {TARGET}")


if __name__ == "__main__":
    sys.exit(main())
