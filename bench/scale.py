"""Cost as the event store grows: write and read latencies, projection rebuild and consumer
catch-up at 10^4, 10^5 and 10^6 events, each latency beside the same call on a 10^4-event
store measured in the same rounds.

    .venv/bin/python bench/scale.py [--quick] [--verbose] [--database-url URL]

Two scratch databases: the *reference* store holds the smallest size for the whole run; the
*grown* store is preloaded (COPY, many streams over 10 tenants, with their projection rows)
up to each size in turn. At every size both are measured in alternating rounds, so that a
busy moment of the shared machine counts against both, and the ratio grown / reference is
printed beside its target (<= 1.2). ``--verbose`` prints the query plan of every statement
the measured calls run (EXPLAIN ANALYZE on the grown store).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import random
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import psycopg

from _common import ADMIN_URL, conninfo, describe_setup, scratch_database
from _results import Figure, at_most, write_figures
from asanoha import Access, App, Entity, Feature, SessionUser, Settings, fields
from asanoha.platform.store import EVENT_COLUMNS as STORED_EVENT_COLUMNS
from asanoha.platform.store import rebuild_projection
from asanoha.testing.statements import capture_statements

FEATURE = "scale"
ITEM = "item"
NOTE = "note"
ITEM_KEY = f"{FEATURE}:{ITEM}"
WRITER = Access(roles=["writer"])
TENANTS = tuple(f"tenant-{t}" for t in range(10))
USERS = tuple(SessionUser.of(f"user-{t}", tenant, ["writer"]) for t, tenant in enumerate(TENANTS))
STATUSES = ("open", "closed", "archived")
#: A stream holds 1 to 4 events (a create, then updates): 2.5 on average.
EVENTS_PER_STREAM = 4
#: Every fourth stream is an item, the rest notes: the rebuilt type is a quarter of the store.
ITEM_EVERY = 4
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000, 20_000)
LATENCY_TARGET = 1.2
REBUILD_TARGET = 20_000
OPERATIONS = ("create", "update", "detail", "list")
#: Rows a list page asks for: full on every store (the smallest holds about 33 items of a
#: status per tenant), so that the grown store's pages are not longer than the reference's.
LIST_PAGE = 25
CONSUMER_QN = f"{FEATURE}:consumer:tally"
#: Streams per COPY batch: events of a batch interleave (all creates, then the updates).
BATCH_STREAMS = 20_000
BASE_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def scale_feature() -> Feature:
    """Two entities: ``item`` is written, read and rebuilt, and refers to a ``note`` (whose
    title its lists and details answer in ``_refs``); ``note`` fills the store."""
    feature = Feature(FEATURE)
    item = Entity(
        table="scale_items",
        soft_delete=True,
        fields={
            "title": fields.text(required=True, personal=False, reason="benchmark data"),
            "status": fields.select(STATUSES, filterable=True),
            "amount": fields.integer(sortable=True, filterable=True),
            # Its note's title comes with every list page and detail, as ``_refs``.
            "note": fields.reference(NOTE, label_field="title"),
        },
    )
    note = Entity(
        table="scale_notes",
        fields={
            "title": fields.text(required=True, personal=False, reason="benchmark data"),
            "amount": fields.integer(),
        },
    )
    feature.crud(
        ITEM, item, write=WRITER, read=WRITER, verbs=["create", "update", "detail", "list"]
    )
    feature.crud(NOTE, note, write=WRITER, read=WRITER, verbs=["create"])
    if hasattr(feature, "consumer"):

        @feature.consumer(
            "tally", on=[f"{FEATURE}:event:{ITEM}.created", f"{FEATURE}:event:{ITEM}.updated"]
        )
        def tally(event: Any, ctx: Any) -> None:
            """Count the item events: what catch-up costs without the handler's own work."""
            TALLIED[0] += 1

    return feature


#: Item events the ``tally`` consumer was handed (this process only).
TALLIED = [0]


def qn(kind: str, entity: str, verb: str) -> str:
    return f"{FEATURE}:{kind}:{entity}:{verb}"


# -- the preloaded streams ------------------------------------------------------------------
# Everything about stream ``i`` follows from ``i``, so the benchmark can pick existing rows
# (with their current version) without reading them back.


def stream_id(i: int) -> uuid.UUID:
    return uuid.UUID(int=(0xA5A5 << 112) | i)


def stream_entity(i: int) -> str:
    return ITEM if i % ITEM_EVERY == 0 else NOTE


def stream_tenant(i: int) -> int:
    return (i // ITEM_EVERY) % len(TENANTS)


def note_of(i: int) -> int:
    """The note item stream ``i`` refers to: the stream after it (a note of its tenant,
    preloaded in the same batch, since a batch holds whole groups of ``ITEM_EVERY``)."""
    return i + 1


def stream_length(i: int) -> int:
    return 1 + (i // ITEM_EVERY) % EVENTS_PER_STREAM


def amount_at(i: int, version: int) -> int:
    return (i * 7919 + version) % 10_000


def streams_for(events: int, first: int) -> int:
    """How many streams from ``first`` on hold at least ``events`` events."""
    count, total = 0, 0
    while total < events:
        total += stream_length(first + count)
        count += 1
    return count


def _copy_line(*values: object) -> str:
    # COPY text format: tab-separated, \N for NULL. The values here never hold a tab, a
    # newline or a backslash, so nothing needs escaping.
    return "\t".join("\\N" if v is None else str(v) for v in values) + "\n"


def _stamp(i: int, version: int) -> str:
    return (BASE_TIME + dt.timedelta(milliseconds=i * 10 + version)).isoformat()


def preload(url: str, first: int, count: int) -> None:
    """Append the events of streams ``first .. first+count-1`` and write their rows (COPY)."""
    with psycopg.connect(conninfo(url)) as conn:
        for start in range(first, first + count, BATCH_STREAMS):
            end = min(first + count, start + BATCH_STREAMS)
            events, items, notes = io.StringIO(), io.StringIO(), io.StringIO()
            for version in range(1, EVENTS_PER_STREAM + 1):
                for i in range(start, end):
                    if version <= stream_length(i):
                        events.write(_event_line(i, version))
            for i in range(start, end):
                (items if stream_entity(i) == ITEM else notes).write(_row_line(i))
            with conn.cursor() as cursor:
                _copy(cursor, "asanoha_events", EVENT_COLUMNS, events)
                _copy(cursor, "scale_items", ITEM_COLUMNS, items)
                _copy(cursor, "scale_notes", NOTE_COLUMNS, notes)
            conn.commit()
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        # What autovacuum does to a real store in time: statistics and the visibility map.
        conn.execute("VACUUM ANALYZE")


#: Every event column but ``id``, which the store assigns.
EVENT_COLUMNS = tuple(name for name in STORED_EVENT_COLUMNS if name != "id")
BASE_COLUMNS = ("id", "tenant_id", "version", "created_at", "created_by", "modified_at")
ITEM_COLUMNS = (
    *BASE_COLUMNS,
    "modified_by",
    "is_deleted",
    "deleted_at",
    "deleted_by",
    "title",
    "status",
    "amount",
    "note",
)
NOTE_COLUMNS = (*BASE_COLUMNS, "modified_by", "title", "amount")


def _copy(
    cursor: psycopg.Cursor[Any], table: str, columns: Sequence[str], data: io.StringIO
) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(data.getvalue())


def _event_line(i: int, version: int) -> str:
    entity = stream_entity(i)
    tenant = TENANTS[stream_tenant(i)]
    user = f"user-{stream_tenant(i)}"
    if version == 1:
        verb = "created"
        status = (
            f', "status": "{STATUSES[i % 3]}", "note": "{stream_id(note_of(i))}"'
            if entity == ITEM
            else ""
        )
        payload = f'{{"data": {{"title": "{entity} {i}"{status}, "amount": {amount_at(i, 1)}}}}}'
        handler = qn("write", entity, "create")
    else:
        verb = "updated"
        payload = f'{{"changes": {{"amount": {amount_at(i, version)}}}}}'
        handler = qn("write", entity, "update")
    metadata = (
        f'{{"user_id": "{user}", "tenant_id": "{tenant}", "handler": "{handler}", '
        f'"entry_handler": "{handler}", "origin": null, "request_id": "{i:032x}{version}", '
        '"correlation_id": null, "causation_id": null}'
    )
    return _copy_line(
        stream_id(i),
        f"{FEATURE}:{entity}",
        tenant,
        version,
        f"{FEATURE}:event:{entity}.{verb}",
        1,
        payload,
        metadata,
        _stamp(i, version),
        user,
    )


def _row_line(i: int) -> str:
    """The projection row of stream ``i``: what replaying its events writes."""
    entity = stream_entity(i)
    tenant = stream_tenant(i)
    last = stream_length(i)
    base = (stream_id(i), TENANTS[tenant], last, _stamp(i, 1), f"user-{tenant}", _stamp(i, last))
    if entity == ITEM:
        return _copy_line(
            *base,
            f"user-{tenant}",
            "f",
            None,
            None,
            f"item {i}",
            STATUSES[i % 3],
            amount_at(i, last),
            stream_id(note_of(i)),
        )
    return _copy_line(*base, f"user-{tenant}", f"note {i}", amount_at(i, last))


# -- one store ------------------------------------------------------------------------------


@dataclass
class Store:
    """One scratch database with its app, and the preloaded streams it holds."""

    name: str
    url: str
    app: App
    streams: int = 0
    events: int = 0
    #: Current version of the preloaded item streams the run has updated.
    versions: dict[int, int] = field(default_factory=dict)
    created: int = 0

    def grow_to(self, events: int) -> float:
        """Preload streams until the store holds ``events`` preloaded events; return seconds."""
        if events <= self.events:
            return 0.0
        count = streams_for(events - self.events, self.streams)
        # Whole groups of ``ITEM_EVERY`` streams: an item's note is preloaded with it.
        count = -(-count // ITEM_EVERY) * ITEM_EVERY
        started = time.perf_counter()
        preload(self.url, self.streams, count)
        self.events += sum(stream_length(i) for i in range(self.streams, self.streams + count))
        self.streams += count
        return time.perf_counter() - started

    def pick_item(self, rng: random.Random) -> int:
        """A random preloaded item stream."""
        return ITEM_EVERY * rng.randrange(self.streams // ITEM_EVERY)

    def version_of(self, i: int) -> int:
        """The current version of preloaded stream ``i``."""
        return self.versions.get(i, stream_length(i))


def run_operation(store: Store, operation: str, rng: random.Random) -> None:
    """One call of ``operation`` through the service layer, as a tenant's user."""
    service = store.app.service
    if operation == "create":
        store.created += 1
        t = rng.randrange(len(TENANTS))
        payload = {"title": f"new {store.created}", "status": "open", "amount": store.created}
        service.dispatch_write(qn("write", ITEM, "create"), payload, USERS[t])
    elif operation == "update":
        i = store.pick_item(rng)
        version = store.version_of(i)
        payload = {
            "id": str(stream_id(i)),
            "version": version,
            "changes": {"amount": amount_at(i, version + 1)},
        }
        service.dispatch_write(qn("write", ITEM, "update"), payload, USERS[stream_tenant(i)])
        store.versions[i] = version + 1
    elif operation == "detail":
        i = store.pick_item(rng)
        found = service.dispatch_query(
            qn("query", ITEM, "detail"), {"id": str(stream_id(i))}, USERS[stream_tenant(i)]
        )
        if found is None:
            raise RuntimeError(f"{store.name}: item {i} not found")
    elif operation == "list":
        # Filtered on one field, sorted on another, first page: the common list call, with
        # the labels of the notes its rows refer to (``_refs``, one query for the page).
        payload = {
            "filter": {"status": STATUSES[rng.randrange(2)]},
            "sort": ["-amount"],
            "limit": LIST_PAGE,
        }
        page = service.dispatch_query(
            qn("query", ITEM, "list"), payload, USERS[rng.randrange(len(TENANTS))]
        )
        if not page["rows"]:
            raise RuntimeError(f"{store.name}: empty list page")
        if not page.get("_refs"):
            raise RuntimeError(f"{store.name}: a list page without the notes' labels")
    else:
        raise ValueError(operation)


# -- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """Milliseconds per call of one operation on one store."""

    samples: tuple[float, ...]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def measure_latencies(
    stores: Sequence[Store], calls: int, rounds: int, rng: random.Random
) -> dict[tuple[str, str], Latency]:
    """``calls`` calls of each operation per round on each store, alternating call by call."""
    samples: dict[tuple[str, str], list[float]] = {}
    for store in stores:  # warm up: pools filled, statements prepared, caches loaded
        for operation in OPERATIONS:
            for _ in range(max(5, calls // 5)):
                run_operation(store, operation, rng)
    for _ in range(rounds):
        for operation in OPERATIONS:
            # Call by call, the stores alternating: the machine's load changes within
            # milliseconds here, and both stores should see the same.
            for _ in range(calls):
                for store in stores:
                    started = time.perf_counter()
                    run_operation(store, operation, rng)
                    elapsed = 1000 * (time.perf_counter() - started)
                    samples.setdefault((store.name, operation), []).append(elapsed)
    return {key: Latency(tuple(values)) for key, values in samples.items()}


def measure_rebuild(store: Store) -> tuple[int, float]:
    """Rebuild the item table from its events; return the events replayed and the seconds."""
    app = store.app
    entity_def = app.registry.find_entity(ITEM_KEY)
    assert entity_def is not None
    started = time.perf_counter()
    with app.database.begin() as conn:
        replayed = rebuild_projection(conn, app.service.tables, entity_def)
    seconds = time.perf_counter() - started
    with psycopg.connect(conninfo(store.url), autocommit=True) as conn:
        # The rebuild rewrote every row: clean up before the next latencies are taken.
        conn.execute("VACUUM ANALYZE scale_items")
    return replayed, seconds


def measure_consumer_catch_up(store: Store) -> tuple[int, float] | None:
    """Move the ``tally`` consumer back to the first event and time its catch-up through
    ``app.consumers.run_once``: (events handed to it, seconds); ``None`` without consumers."""
    consumers = getattr(store.app, "consumers", None)
    if consumers is None or CONSUMER_QN not in consumers.names:
        return None
    with psycopg.connect(conninfo(store.url), autocommit=True) as conn:
        conn.execute(
            "UPDATE asanoha_consumers SET position = 0, gaps = '[]' WHERE name = %s",
            (CONSUMER_QN,),
        )
    before = TALLIED[0]
    started = time.perf_counter()
    consumers.run_once([CONSUMER_QN])
    return TALLIED[0] - before, time.perf_counter() - started


# -- query plans ----------------------------------------------------------------------------


def print_plans(grown: Store, reference: Store, rng: random.Random) -> None:
    """EXPLAIN ANALYZE every reading statement of each measured operation on the grown store."""
    statements: dict[str, tuple[str, Any]] = {}
    for operation in OPERATIONS:
        with capture_statements(grown.app.database.engine) as found:
            run_operation(grown, operation, rng)
        for statement, parameters in found:
            if statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
                statements.setdefault(f"{operation}: {statement}", (statement, parameters))
    # The rebuild's batch read, captured on the small reference store, explained on this one.
    entity_def = reference.app.registry.find_entity(ITEM_KEY)
    assert entity_def is not None
    with (
        capture_statements(reference.app.database.engine) as found,
        reference.app.database.connect() as conn,
    ):
        rebuild_projection(conn, reference.app.service.tables, entity_def, batch=1000)
        conn.rollback()
    for statement, parameters in found:
        if "asanoha_events" in statement and statement.lstrip().upper().startswith("SELECT"):
            statements.setdefault(f"rebuild: {statement}", (statement, parameters))
            break
    with grown.app.database.engine.connect() as conn:
        for label, (statement, parameters) in statements.items():
            print(f"\n  -- {label.split(':')[0]}: {' '.join(statement.split())[:300]}")
            plan = conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement}", parameters
            )
            for (line,) in plan:
                print(f"     {line}")
            conn.rollback()  # an explained UPDATE ran: undo it


# -- the run --------------------------------------------------------------------------------


@dataclass
class SizeResult:
    """What was measured at one size of the grown store."""

    events: int
    preload_seconds: float
    latencies: dict[tuple[str, str], Latency]
    rebuilt: int
    rebuild_seconds: float
    #: (events handed to the consumer, seconds), or ``None`` without consumers.
    catch_up: tuple[int, float] | None

    @property
    def rebuild_rate(self) -> float:
        return self.rebuilt / self.rebuild_seconds if self.rebuild_seconds else 0.0

    @property
    def catch_up_rate(self) -> float | None:
        if self.catch_up is None or not self.catch_up[1]:
            return None
        return self.catch_up[0] / self.catch_up[1]

    def latency_ratio(self, operation: str) -> float:
        """p50 of the grown store over p50 of the reference store."""
        reference = self.latencies["reference", operation].p50
        return self.latencies["grown", operation].p50 / reference if reference else 0.0


def main(argv: list[str] | None = None) -> int:
    """Grow the store size by size, measure at each, and print the table and the ratios."""
    args = parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    calls = args.calls or (20 if args.quick else 100)
    rounds = args.rounds or (2 if args.quick else 5)
    rng = random.Random(12)
    results: list[SizeResult] = []
    with ExitStack() as stack:
        stores = []
        for name in ("reference", "grown"):
            url = stack.enter_context(scratch_database(args.database_url, f"asanoha_bench_{name}"))
            # No consumer wake-up task after each write: there is no worker, and the
            # catch-up is measured on its own.
            settings = Settings(database_url=url, consumer_wake=False)
            app = App(features=[scale_feature()], settings=settings)
            stack.callback(app.close)
            app.create_schema()
            stores.append(Store(name, url, app))
        reference, grown = stores
        print(
            f"scale: sizes {', '.join(f'{s:,}' for s in sizes)} events; {calls} calls x "
            f"{rounds} rounds per operation and store; {describe_setup(grown.url)}"
        )
        reference.grow_to(sizes[0])
        for size in sizes:
            loaded = grown.grow_to(size)
            print(f"  {grown.events:,} events preloaded ({loaded:.1f} s); measuring")
            latencies = measure_latencies(stores, calls, rounds, rng)
            rebuilt, rebuild_seconds = measure_rebuild(grown)
            catch_up = measure_consumer_catch_up(grown)
            results.append(
                SizeResult(grown.events, loaded, latencies, rebuilt, rebuild_seconds, catch_up)
            )
            print_size(results[-1])
            if args.verbose:
                print_plans(grown, reference, rng)
    print_report(results)
    write_figures(args.json, figures_of(results))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES} (smoke run)")
    parser.add_argument("--verbose", action="store_true", help="print the query plans")
    parser.add_argument("--calls", type=int, help="calls per operation, store and round")
    parser.add_argument("--rounds", type=int, help="alternating rounds")
    parser.add_argument(
        "--database-url",
        default=ADMIN_URL,
        help="admin URL used to create and drop the bench databases",
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


# -- report ---------------------------------------------------------------------------------


def describe_catch_up(result: SizeResult) -> str:
    rate = result.catch_up_rate
    if rate is None or result.catch_up is None:
        return "n/a (no app.consumers)"
    return f"{rate:,.0f} events/s"


def print_size(result: SizeResult) -> None:
    for operation in OPERATIONS:
        grown = result.latencies["grown", operation]
        reference = result.latencies["reference", operation]
        print(
            f"    {operation:<8} p50 {grown.p50:6.2f} ms (reference {reference.p50:6.2f})   "
            f"p99 {grown.p99:6.2f} ms (reference {reference.p99:6.2f})"
        )
    caught = f" ({result.catch_up[0]:,} events)" if result.catch_up else ""
    print(
        f"    rebuild  {result.rebuilt:,} events in {result.rebuild_seconds:.2f} s: "
        f"{result.rebuild_rate:,.0f} events/s;  consumer catch-up: "
        f"{describe_catch_up(result)}{caught}"
    )


def print_report(results: Sequence[SizeResult]) -> None:
    reference_size = results[0].events
    print()
    print(
        f"latency in ms (p50 / p99) at each store size; ratio = grown / reference store "
        f"({reference_size:,} events) in the same rounds, target <= {LATENCY_TARGET}"
    )
    header = "".join(f"{f'{r.events:,} events':>26}" for r in results)
    print(f"{'':<10}{header}")
    for operation in OPERATIONS:
        cells = ""
        for result in results:
            grown = result.latencies["grown", operation]
            ratio = result.latency_ratio(operation)
            cells += f"{f'{grown.p50:.2f} / {grown.p99:.2f} (x{ratio:.2f})':>26}"
        print(f"{operation:<10}{cells}")
    rebuild = "".join(f"{f'{r.rebuild_rate:,.0f} events/s':>26}" for r in results)
    print(f"{'rebuild':<10}{rebuild}   target >= {REBUILD_TARGET:,}")
    print(f"{'catch-up':<10}{''.join(f'{describe_catch_up(r):>26}' for r in results)}")
    print("(ratio: p50 of the grown store over p50 of the reference store)")
    last = results[-1]
    worst = max(OPERATIONS, key=last.latency_ratio)
    print(
        f"worst p50 ratio at {last.events:,} events: {worst} x{last.latency_ratio(worst):.2f}"
        f"   target <= {LATENCY_TARGET}"
    )


def figures_of(results: Sequence[SizeResult]) -> list[Figure]:
    """The figures of the largest size, against the reference store."""
    first, last = results[0], results[-1]
    size = f"{last.events:,} events"
    figures = []
    for operation in OPERATIONS:
        grown = last.latencies["grown", operation]
        reference = last.latencies["reference", operation]
        ratio = last.latency_ratio(operation)
        figures.append(
            Figure(
                benchmark="scale",
                name=f"{operation} p50 at {size}",
                value=round(grown.p50, 2),
                unit="ms",
                peer=f"same call on a {first.events:,}-event store, same rounds",
                peer_value=round(reference.p50, 2),
                ratio_label="grown / reference",
                ratio=ratio,
                target=f"<= {LATENCY_TARGET}",
                target_met=at_most(ratio, LATENCY_TARGET),
                note=f"p99 {grown.p99:.2f} vs {reference.p99:.2f} ms",
            )
        )
    figures.append(
        Figure(
            benchmark="scale",
            name=f"rebuild_projection at {size} ({last.rebuilt:,} item events)",
            value=round(last.rebuild_rate),
            unit="events/s",
            peer="target",
            peer_value=REBUILD_TARGET,
            ratio_label="rate / target",
            ratio=last.rebuild_rate / REBUILD_TARGET,
            target=f">= {REBUILD_TARGET:,} events/s",
            target_met=last.rebuild_rate >= REBUILD_TARGET,
            note=f"at {first.events:,} events: {first.rebuild_rate:,.0f} events/s",
        )
    )
    rate = last.catch_up_rate
    figures.append(
        Figure(
            benchmark="scale",
            name=f"consumer catch-up at {size}",
            value=round(rate) if rate is not None else float("nan"),
            unit="events/s",
            note=(
                "app.consumers.run_once from position 0, a counting handler"
                if rate is not None
                else "n/a: no app.consumers in this version"
            ),
        )
    )
    return figures


if __name__ == "__main__":
    sys.exit(main())
