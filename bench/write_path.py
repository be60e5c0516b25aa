"""Write-path throughput: asanoha's service-layer create against raw psycopg and the
``eventsourcing`` Postgres recorder, with 1 and 8 threads, in one run on one database; and
the same create with an idempotency key and a rate limit (counted in Redis) against it
without.

    .venv/bin/python bench/write_path.py [--seconds 3 | --writes N] [--database-url URL]
                                         [--redis-url redis://127.0.0.1:6379/0]

Each measurement starts with a warm-up (pools filled, statements prepared). The database is
created for the run and dropped at the end, also when the run fails.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any

import psycopg
from sqlalchemy import make_url

from _common import (
    ADMIN_URL,
    CREATE_QN,
    USER,
    Throughput,
    Work,
    WorkerFactory,
    bench_feature,
    conninfo,
    create_raw_tables,
    describe_setup,
    event_metadata,
    note_payload,
    run_threads,
    scratch_database,
    warm_up_seconds,
    write_raw,
)
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import Access, App, Entity, Feature, SessionUser, Settings, fields
from asanoha.platform.personal.master_keys import generate_master_key

THREAD_COUNTS = (1, 8)
RAW_TARGET = 0.6
RAW_TARGET_ONE_THREAD = 0.75
#: A write with an idempotency key and a rate limit, against the same write without.
KEYED_TARGET = 0.8
KEYED = "asanoha service, idempotency key + rate limit"
LIMITED = "asanoha service, rate limit"
#: A limit per user that the bench's callers stay under (each of CALLERS users calls a few
#: times a minute): it measures the counting, not refusals. Realistic limits keep a short
#: window per key; one caller at a huge limit would make Redis keep every call of a minute.
BENCH_RATE = "600/minute"
CALLERS = [
    SessionUser.of(f"bench-user-{n}", USER.tenant_id, list(USER.roles)) for n in range(10_000)
]
WRITES_BEFORE_TRACE = 10
#: A create with two personal fields (encrypted, a data key per row) against the same create
#: with the fields declared ``personal=False``.
PERSONAL_TARGET = 0.8
PERSONAL = "asanoha service, 2 personal fields"
NOT_PERSONAL = "asanoha service, 2 fields personal=False"
PEOPLE = "bench-people"
#: A create with a reference (checked in the transaction), a money and an embedded field
#: against the same create with plain fields (text, decimal, text).
MODELLED_TARGET = 0.85
MODELLED = "asanoha service, reference+money+embedded"
PLAIN = "asanoha service, the same as plain fields"
DEALS = "bench-deals"


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and print the table and the ratios."""
    args = parse_args(argv)
    results: dict[tuple[str, int], Throughput] = {}
    notes: list[str] = []
    with scratch_database(args.database_url, "asanoha_bench_write") as url, ExitStack() as stack:
        app = App(
            features=[bench_feature()],
            settings=Settings(database_url=url, database_pool_size=max(THREAD_COUNTS)),
        )
        stack.callback(app.close)
        app.create_schema()
        # The same application with a rate limit on every handler (the default setting: the
        # same check a declared RateLimit gets), under keys of this run alone.
        keyed_app = App(
            features=[bench_feature()],
            settings=Settings(
                database_url=url,
                database_pool_size=max(THREAD_COUNTS),
                rate_limit_url=args.redis_url,
                rate_limit_default=BENCH_RATE,
                queue_prefix=f"asanoha-bench-{uuid.uuid4().hex[:12]}",
            ),
        )
        stack.callback(keyed_app.close)
        # Personal values sealed under a master key of this run.
        people_app = App(
            features=[people_feature()],
            settings=Settings(
                database_url=url,
                database_pool_size=max(THREAD_COUNTS),
                master_key=generate_master_key(),
            ),
        )
        stack.callback(people_app.close)
        people_app.create_schema()
        deals_app = App(
            features=[deals_feature()],
            settings=Settings(database_url=url, database_pool_size=max(THREAD_COUNTS)),
        )
        stack.callback(deals_app.close)
        deals_app.create_schema()
        account = deals_app.service.dispatch_write(
            f"{DEALS}:write:account:create", {"name": "Acme"}, USER
        )
        create_raw_tables(url)
        amount = f"{args.writes} writes" if args.writes else f"{args.seconds:g} s"
        print(f"write path, {amount} per measurement; {describe_setup(url)}")
        targets: dict[str, WorkerFactory] = {
            "asanoha service": lambda: asanoha_worker(app),
            "raw psycopg": lambda: raw_worker(url),
            KEYED: lambda: keyed_worker(keyed_app),
            LIMITED: lambda: limited_worker(keyed_app),
            PERSONAL: lambda: people_worker(people_app, "person"),
            NOT_PERSONAL: lambda: people_worker(people_app, "plain-person"),
            MODELLED: lambda: deals_worker(deals_app, "deal", str(account["id"])),
            PLAIN: lambda: deals_worker(deals_app, "plain-deal", str(account["id"])),
        }
        recorders = stack.enter_context(eventsourcing_recorders(url, max(THREAD_COUNTS), notes))
        targets.update(recorders)
        # Alternate the writers round by round, so that a change in the machine's load
        # affects all of them; keep each one's best round.
        for round_ in range(1, args.rounds + 1):
            for threads in THREAD_COUNTS:
                for name, make_worker in targets.items():
                    result = measure(make_worker, threads, args)
                    best = results.get((name, threads))
                    if best is None or result.rate > best.rate:
                        results[name, threads] = result
                    print(f"  round {round_}  {name:<36}{threads} thread(s) {result.rate:8.0f}/s")
        trips = {
            "asanoha service": trace_asanoha(url),
            KEYED: trace_asanoha(url, keyed=True),
            "raw psycopg": trace_raw(url),
        }
    print_report(results, trips, notes)
    write_figures(args.json, figures_of(results))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    amount.add_argument("--writes", type=int, help="per measurement, instead of --seconds")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per writer; best kept")
    parser.add_argument(
        "--database-url",
        default=ADMIN_URL,
        help="admin URL used to create and drop the bench database",
    )
    parser.add_argument(
        "--redis-url", default="redis://127.0.0.1:6379/0", help="where rate limits are counted"
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


def measure(make_worker: WorkerFactory, threads: int, args: argparse.Namespace) -> Throughput:
    """Warm up, then measure, with the same number of threads."""
    if args.writes is not None:
        run_threads(make_worker, threads, seconds=0, calls=max(threads * 20, args.writes // 10))
        return run_threads(make_worker, threads, seconds=0, calls=args.writes)
    run_threads(make_worker, threads, seconds=warm_up_seconds(args.seconds))
    return run_threads(make_worker, threads, seconds=args.seconds)


# -- the three writers ----------------------------------------------------------------------


@contextmanager
def asanoha_worker(app: App) -> Iterator[Work]:
    """One create through the service layer: the path HTTP, jobs and consumers take."""
    dispatch = app.service.dispatch_write
    yield lambda n: dispatch(CREATE_QN, note_payload(n), USER)


@contextmanager
def keyed_worker(app: App) -> Iterator[Work]:
    """The same create with a fresh idempotency key (a first write, stored with its outcome)
    through a handler with a rate limit (one count in Redis per call)."""
    dispatch = app.service.dispatch_write
    run = uuid.uuid4().hex

    def work(n: int) -> object:
        caller = CALLERS[n % len(CALLERS)]
        return dispatch(CREATE_QN, note_payload(n), caller, idempotency_key=f"{run}-{n}")

    yield work


@contextmanager
def limited_worker(app: App) -> Iterator[Work]:
    """The same create through a handler with a rate limit, without an idempotency key."""
    dispatch = app.service.dispatch_write
    yield lambda n: dispatch(CREATE_QN, note_payload(n), CALLERS[n % len(CALLERS)])


def people_feature() -> Feature:
    """Two entities with an e-mail and a name: personal (``"self"``) in one, not in the other."""
    feature = Feature(PEOPLE)
    writer = Access(roles=list(USER.roles))
    for name, stance in (("person", {"personal": "self"}), ("plain-person", {})):
        declared: dict[str, Any] = stance or {"personal": False, "reason": "benchmark data"}
        entity = Entity(
            table=f"bench_{name.replace('-', '_')}",
            fields={
                "email": fields.text(required=True, **declared),
                "name": fields.text(required=True, **declared),
            },
        )
        feature.crud(name, entity, write=writer, read=writer, verbs=["create", "detail"])
    return feature


@contextmanager
def people_worker(app: App, entity: str) -> Iterator[Work]:
    """One create of ``entity`` with an e-mail and a name."""
    dispatch = app.service.dispatch_write
    qn = f"{PEOPLE}:write:{entity}:create"
    yield lambda n: dispatch(qn, {"email": f"person-{n}@example.org", "name": f"Person {n}"}, USER)


def deals_feature() -> Feature:
    """An account, and two deals of it: one with a reference, a money and an embedded field,
    one with the same values in plain fields."""
    feature = Feature(DEALS)
    writer = Access(roles=list(USER.roles))
    plain = {"personal": False, "reason": "benchmark data"}
    account = Entity(table="bench_accounts", fields={"name": fields.text(**plain)})
    feature.crud("account", account, write=writer, read=writer, verbs=["create"])
    modelled = Entity(
        table="bench_deals",
        fields={
            "account": fields.reference("account", required=True),
            "amount": fields.money(required=True, min="0"),
            "address": fields.embedded(
                {"street": fields.text(), "city": fields.text(required=True)}, **plain
            ),
        },
    )
    flat = Entity(
        table="bench_plain_deals",
        fields={
            "account": fields.text(required=True, **plain),
            "amount": fields.decimal(required=True),
            "currency": fields.text(required=True, max_length=3, **plain),
            "street": fields.text(**plain),
            "city": fields.text(required=True, **plain),
        },
    )
    for name, entity in (("deal", modelled), ("plain-deal", flat)):
        feature.crud(name, entity, write=writer, read=writer, verbs=["create"])
    return feature


@contextmanager
def deals_worker(app: App, entity: str, account: str) -> Iterator[Work]:
    """One create of ``entity`` for ``account``, with an amount and an address."""
    dispatch = app.service.dispatch_write
    qn = f"{DEALS}:write:{entity}:create"
    if entity == "deal":

        def payload(n: int) -> dict[str, Any]:
            return {
                "account": account,
                "amount": {"amount": f"{n % 1000}.50", "currency": "EUR"},
                "address": {"street": f"Street {n}", "city": "Berlin"},
            }
    else:

        def payload(n: int) -> dict[str, Any]:
            return {
                "account": account,
                "amount": f"{n % 1000}.50",
                "currency": "EUR",
                "street": f"Street {n}",
                "city": "Berlin",
            }

    yield lambda n: dispatch(qn, payload(n), USER)


@contextmanager
def raw_worker(url: str) -> Iterator[Work]:
    """The same event + row in one transaction, on a connection of this thread's own."""
    with psycopg.connect(conninfo(url)) as conn:
        yield lambda n: write_raw(conn, note_payload(n))


@contextmanager
def eventsourcing_recorders(
    url: str, pool_size: int, notes: list[str]
) -> Iterator[dict[str, WorkerFactory]]:
    """Workers for the ``eventsourcing`` recorders; none when the library is not installed."""
    try:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.postgres import (
            PostgresAggregateRecorder,
            PostgresApplicationRecorder,
            PostgresDatastore,
        )
    except ImportError:
        notes.append("eventsourcing is not installed (pip install -e '.[bench]'): skipped")
        yield {}
        return
    parsed = make_url(url)
    datastore = PostgresDatastore(
        dbname=parsed.database or "postgres",
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 5432,
        user=parsed.username or "postgres",
        password=parsed.password or "",
        pool_size=pool_size,
    )
    try:
        # The application recorder is what an eventsourcing Application uses: events get a
        # global notification id that followers read in order, like asanoha's positions.
        application = PostgresApplicationRecorder(datastore, events_table_name="es_events")
        application.create_table()
        # The aggregate recorder has no global order and does less per insert: context.
        aggregate = PostgresAggregateRecorder(datastore, events_table_name="es_aggregate_events")
        aggregate.create_table()

        def worker_of(recorder: Any) -> WorkerFactory:
            def work(n: int) -> object:
                # One event per call, each the first event of a new aggregate.
                body = {"data": note_payload(n), "metadata": event_metadata(USER)}
                state = json.dumps(body).encode()
                event = StoredEvent(uuid.uuid4(), 1, "bench.notes:Note.Created", state)
                return recorder.insert_events([event])

            return lambda: nullcontext(work)

        yield {
            "eventsourcing application recorder": worker_of(application),
            "eventsourcing aggregate recorder": worker_of(aggregate),
        }
    finally:
        datastore.close()


# -- round trips per write ------------------------------------------------------------------


def trace_asanoha(url: str, *, keyed: bool = False) -> list[str]:
    """The round trips of one service-layer create, from a libpq protocol trace (``keyed``:
    with an idempotency key; the rate limit's Redis call is not in a Postgres trace)."""
    app = App(features=[bench_feature()], settings=Settings(database_url=url, database_pool_size=1))
    run = uuid.uuid4().hex

    def write(n: int) -> object:
        key = f"{run}-{n}" if keyed else None
        return app.service.dispatch_write(CREATE_QN, note_payload(n), USER, idempotency_key=key)

    try:
        write(-1)
        # A pool of one: the connection traced here is the one every later write checks out.
        pooled = app.database.engine.raw_connection()
        driver: psycopg.Connection[Any] = pooled.driver_connection  # type: ignore[assignment]
        pooled.close()
        return trace_last_write(driver, write)
    finally:
        app.close()


def trace_raw(url: str) -> list[str]:
    """The round trips of one raw create."""
    with psycopg.connect(conninfo(url)) as conn:
        return trace_last_write(conn, lambda n: write_raw(conn, note_payload(n)))


def trace_last_write(conn: psycopg.Connection[Any], work: Work) -> list[str]:
    """The round trips of a steady-state write: after enough writes that psycopg has prepared
    its statements (their names are learnt from the earlier trace)."""
    prepared: dict[str, str] = {}
    with libpq_trace(conn) as read:
        for n in range(WRITES_BEFORE_TRACE):
            work(n)
        round_trips(read(), prepared)
    with libpq_trace(conn) as read:
        work(WRITES_BEFORE_TRACE)
        return round_trips(read(), prepared)


@contextmanager
def libpq_trace(conn: psycopg.Connection[Any]) -> Iterator[Callable[[], str]]:
    """Record the protocol messages of ``conn``; the yielded function stops and returns them."""
    with tempfile.TemporaryFile() as file:
        conn.pgconn.trace(file.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

        def read() -> str:
            conn.pgconn.untrace()
            file.seek(0)
            return file.read().decode(errors="replace")

        try:
            yield read
        finally:
            conn.pgconn.untrace()


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def round_trips(trace: str, prepared: dict[str, str]) -> list[str]:
    """One line per round trip (client messages up to the server's ReadyForQuery): the
    statement it ran. ``prepared`` maps statement names to SQL and learns new ones."""
    trips: list[str] = []
    current: str | None = None
    for line in trace.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        direction, kind, rest = parts[0], parts[2], "\t".join(parts[3:])
        quoted = _QUOTED.findall(rest)
        if direction == "F":
            statement = None
            if kind == "Query" and quoted:
                statement = quoted[0]
            elif kind == "Parse" and len(quoted) >= 2:
                prepared[quoted[0]] = quoted[1]
                statement = quoted[1]
            elif kind == "Bind" and len(quoted) >= 2:
                statement = prepared.get(quoted[1], f"prepared {quoted[1]}")
            if current is None and statement is not None:
                current = statement
        elif direction == "B" and kind == "ReadyForQuery":
            trips.append(" ".join((current or "?").split()))
            current = None
    return trips


# -- report ---------------------------------------------------------------------------------


def print_report(
    results: dict[tuple[str, int], Throughput], trips: dict[str, list[str]], notes: list[str]
) -> None:
    print()
    least = min(THREAD_COUNTS)
    header = "".join(f"{f'{t} thread(s)':>14}" for t in THREAD_COUNTS)
    print(f"{'writes/s (best round)':<36}{header}   CPU ms/write here, {least} thread")
    for name in dict.fromkeys(name for name, _ in results):
        cells = "".join(f"{results[name, t].rate:14.0f}" for t in THREAD_COUNTS)
        print(f"{name:<36}{cells}{results[name, least].cpu_ms_per_call:14.2f}")
    print("(CPU: this process only, all threads; the Postgres server's share is not in it)")
    print()

    def rate(name: str, threads: int) -> float | None:
        found = results.get((name, threads))
        return found.rate if found else None

    def ratio(label: str, top: float | None, bottom: float | None, target: str) -> None:
        if top is None or bottom is None or bottom == 0:
            return
        print(f"{label:<52}{top / bottom:6.2f}   target {target}")

    for threads in THREAD_COUNTS:
        ratio(
            f"asanoha / raw psycopg, {threads} thread(s)",
            rate("asanoha service", threads),
            rate("raw psycopg", threads),
            f">= {RAW_TARGET_ONE_THREAD if threads == 1 else RAW_TARGET}",
        )
    for threads in THREAD_COUNTS:
        ratio(
            f"with idempotency key + rate limit / without, {threads} thread(s)",
            rate(KEYED, threads),
            rate("asanoha service", threads),
            f">= {KEYED_TARGET}",
        )
        ratio(
            f"with rate limit only / without, {threads} thread(s)",
            rate(LIMITED, threads),
            rate("asanoha service", threads),
            "(context)",
        )
        ratio(
            f"2 personal fields / personal=False, {threads} thread(s)",
            rate(PERSONAL, threads),
            rate(NOT_PERSONAL, threads),
            f">= {PERSONAL_TARGET}",
        )
        ratio(
            f"reference+money+embedded / plain, {threads} thread(s)",
            rate(MODELLED, threads),
            rate(PLAIN, threads),
            f">= {MODELLED_TARGET}",
        )
    most = max(THREAD_COUNTS)
    ratio(
        f"asanoha / eventsourcing application rec., {most} threads",
        rate("asanoha service", most),
        rate("eventsourcing application recorder", most),
        "> 1.0",
    )
    ratio(
        f"asanoha / eventsourcing aggregate rec., {most} threads",
        rate("asanoha service", most),
        rate("eventsourcing aggregate recorder", most),
        "(context)",
    )
    print()
    for name, statements in trips.items():
        print(f"round trips per write, {name}: {len(statements)}")
        for statement in statements:
            # psycopg answers SQLAlchemy's pool_pre_ping with an empty query.
            label = (
                "; (pool pre-ping: liveness check on checkout)" if statement == ";" else statement
            )
            print(f"    {label[:96]}")
    for note in notes:
        print(f"note: {note}")


def figures_of(results: dict[tuple[str, int], Throughput]) -> list[Figure]:
    """The ratios against raw psycopg (1 and 8 threads) and the eventsourcing recorder."""
    figures = []
    mine = "asanoha service"
    targets = {1: RAW_TARGET_ONE_THREAD, max(THREAD_COUNTS): RAW_TARGET}
    peers = [
        ("raw psycopg", threads, f">= {targets[threads]}", targets[threads])
        for threads in THREAD_COUNTS
    ]
    peers.append(("eventsourcing application recorder", max(THREAD_COUNTS), "> 1.0", None))
    for peer, threads, target, bound in peers:
        ours, theirs = results.get((mine, threads)), results.get((peer, threads))
        if ours is None or theirs is None:
            continue
        ratio = safe_ratio(ours.rate, theirs.rate)
        met = at_least(ratio, bound) if bound is not None else (ratio is not None and ratio > 1.0)
        figures.append(
            Figure(
                benchmark="write_path",
                name=f"service-layer create, {threads} thread(s)",
                value=round(ours.rate),
                unit="writes/s",
                peer=peer,
                peer_value=round(theirs.rate),
                ratio_label="asanoha / peer",
                ratio=ratio,
                target=target,
                target_met=met,
                note=(
                    f"CPU {ours.cpu_ms_per_call:.2f} vs {theirs.cpu_ms_per_call:.2f} ms per write "
                    f"in this process ({threads} thread(s))"
                ),
            )
        )
    extras = [
        (KEYED, "create with idempotency key and rate limit", KEYED_TARGET, mine),
        (LIMITED, "create with rate limit only", None, mine),
        (PERSONAL, "create with two personal fields", PERSONAL_TARGET, NOT_PERSONAL),
        (MODELLED, "create with a reference, money and an embedded field", MODELLED_TARGET, PLAIN),
    ]
    for name, label, bound, base in extras:
        for threads in THREAD_COUNTS:
            ours, plain = results.get((name, threads)), results.get((base, threads))
            if ours is None or plain is None:
                continue
            ratio = safe_ratio(ours.rate, plain.rate)
            figures.append(
                Figure(
                    benchmark="write_path",
                    name=f"{label}, {threads} thread(s)",
                    value=round(ours.rate),
                    unit="writes/s",
                    peer={
                        mine: "the same create without",
                        NOT_PERSONAL: "the same create, fields personal=False",
                        PLAIN: "the same create with plain fields",
                    }[base],
                    peer_value=round(plain.rate),
                    ratio_label="with / without",
                    ratio=ratio,
                    target=f">= {bound}" if bound is not None else "(context)",
                    target_met=at_least(ratio, bound) if bound is not None else None,
                    note=(
                        f"CPU {ours.cpu_ms_per_call:.2f} vs {plain.cpu_ms_per_call:.2f} ms per "
                        f"write in this process ({threads} thread(s))"
                    ),
                )
            )
    return figures


if __name__ == "__main__":
    sys.exit(main())
