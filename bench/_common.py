"""Shared setup of the benchmarks: a scratch database, the bench feature, the raw-SQL writer
and a threaded measuring loop.

The raw writer does by hand what one asanoha create does: one event row (JSON payload and
metadata, the same columns and indexes as ``asanoha_events``) and one projection row, in one
transaction. It is the floor the platform is compared against.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import make_url

from asanoha import Access, Entity, Feature, SessionUser, fields

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
FEATURE = "bench"
ENTITY = "note"
CREATE_QN = f"{FEATURE}:write:{ENTITY}:create"
WRITER = Access(roles=["writer"])
USER = SessionUser.of("bench-user", "bench-tenant", ["writer"])


def bench_feature() -> Feature:
    """A feature with one small entity (a text and an integer) and its create/detail."""
    feature = Feature(FEATURE)
    note = Entity(
        table="bench_notes",
        fields={
            "title": fields.text(required=True, personal=False, reason="benchmark data"),
            "amount": fields.integer(),
        },
    )
    feature.crud(ENTITY, note, write=WRITER, read=WRITER, verbs=["create", "detail"])
    return feature


def note_payload(n: int) -> dict[str, Any]:
    """The create payload of the ``n``-th note."""
    return {"title": f"note {n}", "amount": n}


# -- databases ------------------------------------------------------------------------------


def conninfo(url: str) -> str:
    """A libpq connection string for a SQLAlchemy URL."""
    parsed = make_url(url)
    return psycopg.conninfo.make_conninfo(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username or "postgres",
        password=parsed.password or "",
        dbname=parsed.database or "postgres",
    )


@contextmanager
def scratch_database(admin_url: str, prefix: str) -> Iterator[str]:
    """Create a fresh database, yield its SQLAlchemy URL, and drop it however the run ends."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(conninfo(admin_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo(admin_url), autocommit=True) as admin:
            # FORCE: a pool a crashed run left open must not keep the database alive.
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def describe_setup(url: str) -> str:
    """One line on what the figures were measured on."""
    with psycopg.connect(conninfo(url)) as conn:
        found = conn.execute("SHOW server_version").fetchone()
    server = found[0].split()[0] if found else "?"
    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"Postgres {server}, Python {python}, {os.cpu_count()} CPUs, psycopg {psycopg.__version__}"
    )


# -- the raw-SQL writer ---------------------------------------------------------------------


def _one_line(sql: str) -> str:
    return " ".join(sql.split())


RAW_TABLES = """
CREATE TABLE IF NOT EXISTS raw_events (
    id BIGSERIAL PRIMARY KEY,
    stream_id VARCHAR(64) NOT NULL,
    stream_type VARCHAR(200) NOT NULL,
    tenant_id VARCHAR(64) NOT NULL,
    version INTEGER NOT NULL,
    type VARCHAR(200) NOT NULL,
    schema_version INTEGER NOT NULL,
    payload JSONB NOT NULL,
    metadata JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    created_by VARCHAR(64) NOT NULL,
    tx_id XID8 NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT uq_raw_events_stream_version UNIQUE (tenant_id, stream_id, version)
);
CREATE INDEX IF NOT EXISTS ix_raw_events_type_id ON raw_events (type, id);
CREATE TABLE IF NOT EXISTS raw_notes (
    id UUID PRIMARY KEY,
    tenant_id VARCHAR(64) NOT NULL,
    version INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    created_by VARCHAR(64) NOT NULL,
    modified_at TIMESTAMPTZ NOT NULL,
    modified_by VARCHAR(64) NOT NULL,
    title VARCHAR(200),
    amount BIGINT
);
CREATE INDEX IF NOT EXISTS ix_raw_notes_tenant_id ON raw_notes (tenant_id);
"""

# Single-line SQL: protocol traces and server logs show one statement per line.
INSERT_EVENT = _one_line("""
INSERT INTO raw_events (stream_id, stream_type, tenant_id, version, type, schema_version,
                        payload, metadata, created_at, created_by)
VALUES (%s, %s, %s, 1, %s, 1, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
RETURNING id
""")

INSERT_NOTE = _one_line("""
INSERT INTO raw_notes (id, tenant_id, version, created_at, created_by, modified_at,
                       modified_by, title, amount)
VALUES (%s, %s, 1, %s, %s, %s, %s, %s, %s)
""")


def create_raw_tables(url: str) -> None:
    """The event and projection tables of the raw writer."""
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute(RAW_TABLES)


def event_metadata(user: SessionUser) -> dict[str, Any]:
    """What asanoha records with each event, for a create called directly."""
    return {
        "user_id": user.id,
        "tenant_id": user.tenant_id,
        "handler": CREATE_QN,
        "entry_handler": CREATE_QN,
        "request_id": uuid.uuid4().hex,
        "correlation_id": None,
        "causation_id": None,
    }


def write_raw(
    conn: psycopg.Connection[Any], payload: dict[str, Any], user: SessionUser = USER
) -> dict[str, Any]:
    """One create by hand: event + projection row in one transaction; return the row."""
    stream_id = uuid.uuid4()
    now = dt.datetime.now(dt.UTC)
    metadata = event_metadata(user)
    with conn.transaction():
        conn.execute(
            INSERT_EVENT,
            (
                str(stream_id),
                f"{FEATURE}:{ENTITY}",
                user.tenant_id,
                f"{FEATURE}:event:{ENTITY}.created",
                Jsonb({"data": payload}),
                Jsonb(metadata),
                now,
                user.id,
            ),
        ).fetchone()
        conn.execute(
            INSERT_NOTE,
            (
                stream_id,
                user.tenant_id,
                now,
                user.id,
                now,
                user.id,
                payload["title"],
                payload["amount"],
            ),
        )
    return {
        "id": stream_id,
        "tenant_id": user.tenant_id,
        "version": 1,
        "created_at": now,
        "created_by": user.id,
        "modified_at": now,
        "modified_by": user.id,
        **payload,
    }


# -- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    """What one measurement did."""

    calls: int
    seconds: float
    #: CPU time this process spent meanwhile (all threads): what a call costs the caller's
    #: interpreter, whatever else the machine was busy with.
    cpu_seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        """Milliseconds of this process's CPU per call."""
        return 1000 * self.cpu_seconds / self.calls if self.calls else 0.0


#: The loop body of one thread: does call number ``n``.
Work = Callable[[int], object]
#: Opens the loop body of one thread, inside that thread, so that per-thread state (a
#: connection, an HTTP client) is shared with no other thread and closed when it ends.
WorkerFactory = Callable[[], AbstractContextManager[Work]]


def run_threads(
    make_worker: WorkerFactory, threads: int, *, seconds: float, calls: int | None = None
) -> Throughput:
    """Run ``threads`` workers at once, for ``seconds`` or until ``calls`` calls in total."""
    counts = [0] * threads
    finished = [0.0] * threads
    errors: list[BaseException] = []
    ready = threading.Barrier(threads + 1)
    stop = threading.Event()
    quotas: list[int | None] = [
        None if calls is None else calls // threads + (1 if i < calls % threads else 0)
        for i in range(threads)
    ]

    def loop(index: int) -> None:
        n, quota = 0, quotas[index]
        try:
            with make_worker() as work:
                ready.wait()
                while not stop.is_set() and (quota is None or n < quota):
                    # Distinct numbers across threads, so that payloads differ.
                    work(n * threads + index)
                    n += 1
                # Before the worker's teardown (closing connections), which is not a call.
                finished[index] = time.perf_counter()
        except threading.BrokenBarrierError:
            pass
        except BaseException as error:
            errors.append(error)
            ready.abort()
            stop.set()
        counts[index] = n

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        ready.wait()
        started, cpu_started = time.perf_counter(), time.process_time()
        if calls is None:
            stop.wait(seconds)
            stop.set()
        for worker in workers:
            worker.join()
    except threading.BrokenBarrierError:
        pass
    finally:
        # Also on Ctrl-C: stop the workers before their connections are torn down.
        stop.set()
        for worker in workers:
            worker.join()
    cpu = time.process_time() - cpu_started
    if errors:
        raise errors[0]
    return Throughput(sum(counts), max(finished) - started, cpu)


def warm_up_seconds(seconds: float) -> float:
    """How long to run before measuring: long enough to fill pools and prepare statements."""
    return min(1.0, max(0.3, seconds / 3))
