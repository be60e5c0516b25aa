"""Cost of a job's path through its row as the job tables grow: enqueue, relay pass, claim,
end, the lost-message pass and what ``drain()`` counts, with 10^6 finished job rows and
10^5 run rows in the tables, each beside the same call on empty tables in the same rounds.

    .venv/bin/python bench/job_table.py [--quick] [--verbose] [--database-url URL]

Two scratch databases with the app's schema: the *reference* one keeps its job tables empty;
the *grown* one is preloaded (COPY, then VACUUM ANALYZE) with finished job rows (succeeded,
failed and cancelled, over a year of ``created_at``/``finished_at``, some with an
idempotency key, an error or a concurrency key) and one run row per ten of them. Both run
the same cycle, one job at a time, alternating store by store: enqueue (``publish=False``:
the row waits for the relay), one relay pass (which publishes it to a publisher that does
nothing), the claim of its first attempt, its end (succeeded, with its run row), one pass of
``resend_lost_messages`` (an empty broker: nothing is old enough to send) and ``drain()``'s
counts (``count_unfinished`` and ``due_backlog``). The ratio grown / reference of each
call's p50 is printed beside its target (<= 1.2). ``--verbose`` prints the query plan of
every statement of the cycle (EXPLAIN ANALYZE on the grown store, rolled back).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy import event

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _results import Figure, at_most, write_figures
from asanoha import App, Feature, SessionUser, Settings
from asanoha.platform.jobs.attempts import AttemptEnd, Claim, JobRows, job_rows_for
from asanoha.platform.jobs.publishing import relay_outbox, resend_lost_messages
from asanoha.platform.service.outbox import OutboxMessage, count_unfinished, due_backlog

FEATURE = "jobtable"
JOB_QN = f"{FEATURE}:job:noop"
USER = SessionUser.of("bench-user", "bench-tenant", ["writer"])
FINISHED_ROWS = 1_000_000
QUICK_ROWS = 100_000
#: One run row per this many finished job rows (most jobs' runs are pruned sooner).
ROWS_PER_RUN = 10
TARGET = 1.2
OPERATIONS = ("enqueue", "relay pass", "claim", "end", "resend pass", "drain counts")
BATCH = 50_000
BASE_TIME = dt.datetime(2025, 12, 1, tzinfo=dt.UTC)
#: What the preloaded rows end as, one in twenty failed, one in fifty cancelled.
FINISHED = ("succeeded",) * 47 + ("failed",) * 2 + ("cancelled",)
OTHER_JOBS = tuple(f"{FEATURE}:job:other_{n}" for n in range(8))
#: The relay's batch, as the worker's relay loop takes it.
RELAY_LIMIT = 100


def job_feature() -> Feature:
    """One no-op job: what is measured is the row's path, not the job."""
    feature = Feature(FEATURE)

    @feature.job("noop", manual=True)
    def noop(payload: dict[str, Any], ctx: Any) -> None:
        """Does nothing."""
        return None

    return feature


class NullPublisher:
    """A broker that takes every message and does nothing with it."""

    def publish(self, message: OutboxMessage) -> None:
        return None


# -- the preloaded rows ---------------------------------------------------------------------

OUTBOX_COLUMNS = (
    "id", "job_qn", "payload", "headers", "trigger_result", "state", "attempt", "not_before",
    "relay_after", "published_at", "publish_attempts", "last_error", "created_at",
    "started_at", "finished_at", "idempotency_key", "claim_token", "cancel_requested",
    "priority", "concurrency_key", "slot_key",
)  # fmt: skip
RUN_COLUMNS = (
    "job_qn", "task_id", "tenant_id", "attempt", "status", "error", "started_at",
    "finished_at", "logs",
)  # fmt: skip


def _line(*values: object) -> str:
    # COPY text format; no value here holds a tab or a newline (the logs' is escaped).
    return "\t".join("\\N" if v is None else str(v) for v in values) + "\n"


def _row_id(i: int) -> uuid.UUID:
    return uuid.UUID(int=(0x5A5A << 112) | i)


def _job_row(i: int) -> str:
    state = FINISHED[i % len(FINISHED)]
    # A year of rows, 30 s apart on average: the oldest first.
    created = BASE_TIME - dt.timedelta(seconds=31 * (FINISHED_ROWS - i))
    started = created + dt.timedelta(milliseconds=40 + i % 900)
    finished = started + dt.timedelta(milliseconds=5 + i % 2000)
    attempt = 1 if state == "succeeded" else 1 + i % 3
    error = "RuntimeError: upstream refused the request" if state == "failed" else None
    return _line(
        _row_id(i),
        OTHER_JOBS[i % len(OTHER_JOBS)],
        f'{{"order": {i}, "customer": "c-{i % 5000}", "note": "preloaded job row"}}',
        f'{{"tenant_id": "tenant-{i % 10}", "user_id": "user-{i % 50}", '
        f'"request_id": "{i:032x}", "trigger": "manual"}}',
        None,
        state,
        attempt,
        created.isoformat(),
        (created + dt.timedelta(seconds=5)).isoformat(),
        created.isoformat(),
        attempt,
        error,
        created.isoformat(),
        started.isoformat(),
        finished.isoformat(),
        f"order-{i}" if i % 10 == 0 else None,
        f"{i:032x}",
        "t" if state == "cancelled" else "f",
        5 if i % 25 == 0 else None,
        f"c-{i % 5000}" if i % 7 == 0 else None,
        f"tenant-{i % 10}" if i % 7 == 0 else None,
    )


def _run_row(i: int) -> str:
    state = FINISHED[i % len(FINISHED)]
    created = BASE_TIME - dt.timedelta(seconds=31 * (FINISHED_ROWS - i))
    started = created + dt.timedelta(milliseconds=40)
    return _line(
        OTHER_JOBS[i % len(OTHER_JOBS)],
        _row_id(i),
        f"tenant-{i % 10}",
        1,
        state,
        "RuntimeError: upstream refused the request" if state == "failed" else None,
        started.isoformat(),
        (started + dt.timedelta(milliseconds=120)).isoformat(),
        "INFO started\\nINFO done" if i % 3 == 0 else None,  # COPY's escaped newline
    )


def preload(url: str, rows: int) -> float:
    """COPY ``rows`` finished job rows and a tenth as many run rows; return seconds."""
    started = time.perf_counter()
    with psycopg.connect(conninfo(url)) as conn:
        for first in range(0, rows, BATCH):
            jobs, runs = io.StringIO(), io.StringIO()
            for i in range(first, min(rows, first + BATCH)):
                jobs.write(_job_row(i))
                if i % ROWS_PER_RUN == 0:
                    runs.write(_run_row(i))
            with conn.cursor() as cursor:
                _copy(cursor, "asanoha_outbox", OUTBOX_COLUMNS, jobs)
                _copy(cursor, "asanoha_job_runs", RUN_COLUMNS, runs)
            conn.commit()
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        # What autovacuum does to a real table in time: statistics and the visibility map.
        conn.execute("VACUUM ANALYZE asanoha_outbox")
        conn.execute("VACUUM ANALYZE asanoha_job_runs")
    return time.perf_counter() - started


def _copy(
    cursor: psycopg.Cursor[Any], table: str, columns: Sequence[str], data: io.StringIO
) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(data.getvalue())


# -- one store ------------------------------------------------------------------------------


@dataclass
class Store:
    """One scratch database with its app and the job rows of its claims and ends."""

    name: str
    url: str
    app: App
    rows: JobRows
    samples: dict[str, list[float]] = field(default_factory=dict)

    def cycle(self, record: bool) -> None:
        """One job through its row, each call timed (recorded when ``record``)."""
        app = self.app
        database, tables = app.database, app.service.tables
        timed = self._timer(record)
        row_id = timed("enqueue", lambda: app.service.enqueue_job(JOB_QN, {}, USER, publish=False))
        # publish=False leaves the row due to the relay at once.
        sent = timed(
            "relay pass",
            lambda: relay_outbox(database, tables, NullPublisher(), limit=RELAY_LIMIT),
        )
        if sent < 1:
            raise RuntimeError(f"{self.name}: the relay sent nothing")
        claim = timed("claim", lambda: self.rows.claim(row_id, 1))
        if not isinstance(claim, Claim):
            raise RuntimeError(f"{self.name}: claim of {row_id} refused: {claim}")
        ended = timed(
            "end",
            lambda: self.rows.end(
                row_id, JOB_QN, USER.tenant_id, 1, claim, AttemptEnd("succeeded", "succeeded")
            ),
        )
        if not ended:
            raise RuntimeError(f"{self.name}: end of {row_id} not held")
        timed("resend pass", lambda: resend_once(app))
        timed("drain counts", lambda: drain_counts(app))

    def _timer(self, record: bool) -> Callable[[str, Callable[[], Any]], Any]:
        def timed(operation: str, call: Callable[[], Any]) -> Any:
            started = time.perf_counter()
            result = call()
            elapsed = 1000 * (time.perf_counter() - started)
            if record:
                self.samples.setdefault(operation, []).append(elapsed)
            return result

        return timed

    def p50(self, operation: str) -> float:
        return statistics.median(self.samples[operation])

    def p99(self, operation: str) -> float:
        ordered = sorted(self.samples[operation])
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def resend_once(app: App) -> int:
    """One pass of ``resend_lost_messages`` against an empty broker, as the relay runs it
    (an hour's visibility timeout: no row of the cycle is old enough to be sent)."""

    def depths(queues: Sequence[str]) -> Mapping[str, int]:
        return dict.fromkeys(queues, 0)

    lost = resend_lost_messages(
        app.database,
        app.service.tables,
        NullPublisher(),
        lost_after=3600,
        queue_of=lambda job_qn: "worker",
        queue_depths=depths,
        limit=RELAY_LIMIT,
    )
    return lost.sent


def drain_counts(app: App) -> tuple[int, int]:
    """What ``drain()`` reads per pass from the job table."""
    with app.database.connect() as conn:
        unfinished = count_unfinished(conn, app.service.tables)
        backlog = due_backlog(conn, app.service.tables)
    return unfinished, backlog.rows


def open_store(stack: ExitStack, admin_url: str, name: str) -> Store:
    url = stack.enter_context(scratch_database(admin_url, f"asanoha_bench_jobs_{name}"))
    app = App(features=[job_feature()], settings=Settings(database_url=url, consumer_wake=False))
    stack.callback(app.close)
    app.create_schema()
    rows = job_rows_for(app.database, app.service.tables)
    stack.callback(rows.close)
    return Store(name, url, app, rows)


def measure(stores: Sequence[Store], cycles: int, rounds: int) -> None:
    """Warm up, then ``rounds`` x ``cycles`` cycles per store, the stores alternating cycle
    by cycle: the shared machine's load changes within milliseconds."""
    for store in stores:
        for _ in range(max(5, cycles // 5)):
            store.cycle(record=False)
    for _ in range(rounds):
        for _ in range(cycles):
            for store in stores:
                store.cycle(record=True)


# -- query plans ----------------------------------------------------------------------------


@contextmanager
def captured_statements(app: App) -> Iterator[list[tuple[str, Any]]]:
    """The statements (with their parameters) ``app``'s engine runs inside the block."""
    found: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        found.append((statement, parameters))

    event.listen(app.database.engine, "before_cursor_execute", record)
    try:
        yield found
    finally:
        event.remove(app.database.engine, "before_cursor_execute", record)


def print_plans(store: Store) -> None:
    """EXPLAIN ANALYZE each statement of one cycle on ``store`` (rolled back)."""
    app = store.app
    with captured_statements(app) as found:
        row_id = app.service.enqueue_job(JOB_QN, {}, USER, publish=False)
        relay_outbox(app.database, app.service.tables, NullPublisher(), limit=RELAY_LIMIT)
        resend_once(app)
        drain_counts(app)
    seen: set[str] = set()
    with app.database.engine.connect() as conn:
        for statement, parameters in found:
            if not statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
                continue
            if statement in seen or "asanoha_outbox" not in statement:
                continue
            seen.add(statement)
            _print_plan(" ".join(statement.split()), conn.exec_driver_sql, parameters)
            conn.rollback()
    # The claim and the end run on the driver's cursor: explained as compiled there.
    claim_sql = getattr(store.rows, "_claim_sql", None)
    end_sql = getattr(store.rows, "_end_sql", None)
    if claim_sql is None or end_sql is None:
        return
    now = dt.datetime.now(dt.UTC)
    rows = store.rows
    token = "x" * 32
    claim = rows._claim_params(row_id, 1, token, now, "worker")
    ended = Claim(JOB_QN, {}, {}, None, now, token)
    end = {
        **rows._end_params(row_id, 1, ended, AttemptEnd("succeeded", "succeeded"), now),
        **{
            f"run_{name}": value
            for name, value in rows._run_values(
                row_id, JOB_QN, USER.tenant_id, 1, ended, AttemptEnd("succeeded", "succeeded"),
                now,
            ).items()
        },
    }  # fmt: skip
    with psycopg.connect(conninfo(store.url)) as pg:
        params = {**claim_sql.constants, **claim}
        _print_plan(claim_sql.sql, lambda sql, p: pg.execute(sql, p), params)
        pg.execute(claim_sql.sql, params)
        _print_plan(end_sql.sql, lambda sql, p: pg.execute(sql, p), {**end_sql.constants, **end})
        pg.rollback()


def _print_plan(statement: str, execute: Callable[[str, Any], Any], parameters: Any) -> None:
    print(f"\n  -- {statement[:300]}")
    for (line,) in execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement}", parameters):
        print(f"     {line}")


# -- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Preload the grown store, measure both, print the table and the ratios."""
    args = parse_args(argv)
    rows = args.rows or (QUICK_ROWS if args.quick else FINISHED_ROWS)
    cycles = args.cycles or (50 if args.quick else 100)
    rounds = args.rounds or (2 if args.quick else 5)
    with ExitStack() as stack:
        reference = open_store(stack, args.database_url, "reference")
        grown = open_store(stack, args.database_url, "grown")
        print(
            f"job_table: {rows:,} finished job rows and {rows // ROWS_PER_RUN:,} run rows "
            f"against empty tables; {cycles} cycles x {rounds} rounds per store; "
            f"{describe_setup(grown.url)}"
        )
        loaded = preload(grown.url, rows)
        print(f"  preloaded in {loaded:.1f} s; measuring")
        measure((reference, grown), cycles, rounds)
        print_report(reference, grown, rows)
        if args.verbose:
            print_plans(grown)
        write_figures(args.json, figures_of(reference, grown, rows))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows (smoke run)")
    parser.add_argument("--verbose", action="store_true", help="print the query plans")
    parser.add_argument("--rows", type=int, help=f"finished job rows (default {FINISHED_ROWS:,})")
    parser.add_argument("--cycles", type=int, help="jobs per store and round")
    parser.add_argument("--rounds", type=int, help="alternating rounds")
    parser.add_argument(
        "--database-url",
        default=ADMIN_URL,
        help="admin URL used to create and drop the bench databases",
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


def ratio_of(reference: Store, grown: Store, operation: str) -> float:
    bottom = reference.p50(operation)
    return grown.p50(operation) / bottom if bottom else 0.0


def print_report(reference: Store, grown: Store, rows: int) -> None:
    print()
    print(
        f"p50 / p99 in ms; ratio = p50 with {rows:,} finished rows over p50 on empty tables, "
        f"same rounds, target <= {TARGET}"
    )
    print(f"{'':<14}{'grown':>20}{'empty':>20}{'ratio':>9}")
    for operation in OPERATIONS:
        ratio = ratio_of(reference, grown, operation)
        mark = "" if ratio <= TARGET else "   MISSED"
        print(
            f"{operation:<14}"
            f"{f'{grown.p50(operation):.3f} / {grown.p99(operation):.3f}':>20}"
            f"{f'{reference.p50(operation):.3f} / {reference.p99(operation):.3f}':>20}"
            f"{ratio:>9.2f}{mark}"
        )


def figures_of(reference: Store, grown: Store, rows: int) -> list[Figure]:
    figures = []
    for operation in OPERATIONS:
        ratio = ratio_of(reference, grown, operation)
        figures.append(
            Figure(
                benchmark="job_table",
                name=f"{operation} p50, {rows:,} finished job rows",
                value=round(grown.p50(operation), 3),
                unit="ms",
                peer="same call on empty job tables, same rounds",
                peer_value=round(reference.p50(operation), 3),
                ratio_label="grown / empty",
                ratio=ratio,
                target=f"<= {TARGET}",
                target_met=at_most(ratio, TARGET),
                note=(
                    f"p99 {grown.p99(operation):.3f} vs {reference.p99(operation):.3f} ms; "
                    f"{rows // ROWS_PER_RUN:,} run rows"
                ),
            )
        )
    return figures


if __name__ == "__main__":
    sys.exit(main())
