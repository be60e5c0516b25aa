"""Aggregate loads: a 10,000-event stream folded from a snapshot (kept every 100 events) and
its tail, against the same stream folded from its first event; and writes whose event a
declared projection follows (inline, in the write's transaction) against the same writes of
an event nothing follows.

    .venv/bin/python bench/aggregates.py [--events 10000] [--every 100] [--loads 20]
                                         [--writes 2000] [--quick]

The stream is written with ``append_event`` in one transaction, half a snapshot interval of
events after the newest snapshot, so that a snapshotted load folds a tail too. Each load runs
in a transaction of its own, as ``ctx.load`` in a job does; the median load counts. The
database is created for the run and dropped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, update

from _common import ADMIN_URL, describe_setup, scratch_database
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import (
    Access,
    App,
    Feature,
    ProjectionTarget,
    SessionUser,
    Settings,
    StoredEvent,
    WriteContext,
)
from asanoha.platform.model import EventDef
from asanoha.platform.model.aggregates import AggregateDef
from asanoha.platform.store import append_event

RATIO_TARGET = 20.0
INLINE_TARGET = 0.85

TENANT = "bench-tenant"
WRITER = SessionUser.of("bench-user", TENANT, ["writer"])
STREAM = "account-1"


class Moved(BaseModel):
    amount: int


class Account:
    def __init__(self) -> None:
        self.balance = 0
        self.moves = 0

    def apply_moved(self, event: StoredEvent) -> None:
        self.balance += event.payload["amount"]
        self.moves += 1


class Write(BaseModel):
    account: str
    amount: int


totals = Table(
    "bench_totals",
    MetaData(),
    Column("tenant_id", String(64), primary_key=True),
    Column("account", String(64), primary_key=True),
    Column("balance", Integer, nullable=False),
)


def project_totals(event: StoredEvent, target: ProjectionTarget) -> None:
    table, amount = target.table, event.payload["amount"]
    where = (table.c.tenant_id == event.tenant_id, table.c.account == event.stream_id)
    done = target.execute(update(table).where(*where).values(balance=table.c.balance + amount))
    if done.rowcount == 0:
        row = {"tenant_id": event.tenant_id, "account": event.stream_id, "balance": amount}
        target.execute(insert(table).values(**row))


def bench_feature(every: int) -> Feature:
    feature = Feature("ledger")
    moved = feature.event("moved", Moved)
    noted = feature.event("noted", Moved)
    feature.aggregate("snapshotted", snapshot_every=every)(Account)
    feature.aggregate("folded")(Account)
    feature.projection("totals", table=totals, on=[moved.qn])(project_totals)
    for name, event in (("move", moved), ("note", noted)):

        def append(payload: Write, ctx: WriteContext, event: EventDef = event) -> int:
            return ctx.append_event(event, {"amount": payload.amount}, stream_id=payload.account).id

        feature.write_handler(name, access=Access(roles=["writer"]))(append)
    return feature


def write_rate(app: App, handler: str, writes: int, round_: int) -> float:
    """Writes per second of ``handler``, each on a stream of its own (no version waits)."""
    started = time.perf_counter()
    for n in range(writes):
        payload = {"account": f"{handler}-{round_}-{n % 50}", "amount": 1}
        app.service.dispatch_write(f"ledger:write:{handler}", payload, WRITER)
    return writes / (time.perf_counter() - started)


def seed(app: App, events: int) -> None:
    with app.database.begin() as conn:
        for version in range(events):
            append_event(
                conn,
                app.database.backend,
                app.service.tables,
                tenant_id=TENANT,
                stream_id=STREAM,
                stream_type="ledger",
                expected_version=version,
                type="ledger:event:moved",
                payload={"amount": 1},
                metadata={},
                created_by="bench",
            )


def median_load(app: App, aggregate: AggregateDef, loads: int) -> tuple[float, Any]:
    """The median seconds of ``loads`` loads, and the last one's result."""
    times, loaded = [], None
    for _ in range(loads):
        started = time.perf_counter()
        with app.database.begin() as conn:
            loaded = app.service.aggregates.load(
                conn, aggregate, tenant_id=TENANT, stream_id=STREAM
            )
        times.append(time.perf_counter() - started)
    return statistics.median(times), loaded


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with scratch_database(args.database_url, "asanoha_bench_aggregates") as url:
        app = App([bench_feature(args.every)], Settings(database_url=url), publish_jobs=False)
        app.create_schema(migrations=None)
        # The newest snapshot is taken at the first load; the tail then grows past it.
        tail = args.every // 2
        seed(app, args.events - tail)
        snapshotted = app.registry.find_aggregate("ledger:snapshotted")
        folded = app.registry.find_aggregate("ledger:folded")
        assert snapshotted is not None and folded is not None
        median_load(app, snapshotted, 1)
        with app.database.begin() as conn:
            for version in range(args.events - tail, args.events):
                append_event(
                    conn,
                    app.database.backend,
                    app.service.tables,
                    tenant_id=TENANT,
                    stream_id=STREAM,
                    stream_type="ledger",
                    expected_version=version,
                    type="ledger:event:moved",
                    payload={"amount": 1},
                    metadata={},
                    created_by="bench",
                )
        print(f"load of a {args.events:,}-event stream; {describe_setup(url)}")
        fast, quick_loaded = median_load(app, snapshotted, args.loads)
        slow, full_loaded = median_load(app, folded, max(3, args.loads // 4))
        assert vars(quick_loaded.state) == vars(full_loaded.state)
        with_projection, without = [], []
        for round_ in range(args.rounds):
            without.append(write_rate(app, "note", args.writes, round_))
            with_projection.append(write_rate(app, "move", args.writes, round_))
        app.database.dispose()
    ratio = safe_ratio(slow, fast)
    print(
        f"  from a snapshot (every {args.every}) + {quick_loaded.folded} events  {1e3 * fast:9.2f} ms"
    )
    print(f"  folded from the first event ({full_loaded.folded:,})   {1e3 * slow:9.2f} ms")
    print(
        f"  without / with snapshots                 {ratio or 0:9.1f}x   target >= {RATIO_TARGET:.0f}x"
    )
    ceiling = args.events / max(1, quick_loaded.folded)
    if ceiling < 2 * RATIO_TARGET:
        # Both sides fold events at the same cost each: with no cost per load at all, the
        # ratio is still at most the stream's length over the tail's.
        print(
            f"  (at most {ceiling:.0f}x here even with no cost per load: {args.events:,} events "
            f"against a tail of {quick_loaded.folded}; the target is for a 10,000-event stream)"
        )
    inline, plain = max(with_projection), max(without)
    inline_ratio = safe_ratio(inline, plain)
    print(f"  writes, a declared projection inline     {inline:9,.0f} writes/s")
    print(f"  the same writes, no projection           {plain:9,.0f} writes/s")
    print(
        f"  with / without                           {inline_ratio or 0:9.2f}    target >= {INLINE_TARGET}"
    )
    write_figures(
        args.json,
        [
            Figure(
                benchmark="aggregates",
                name="writes whose event a declared projection follows (inline)",
                value=round(inline),
                unit="writes/s",
                peer="the same writes of an event no projection follows",
                peer_value=round(plain),
                ratio_label="with / without",
                ratio=inline_ratio,
                target=f">= {INLINE_TARGET}",
                target_met=at_least(inline_ratio, INLINE_TARGET),
            ),
            Figure(
                benchmark="aggregates",
                name=f"load of a {args.events:,}-event stream, snapshots every {args.every}",
                value=round(1e3 * fast, 3),
                unit="ms",
                peer="the same load folded from the first event",
                peer_value=round(1e3 * slow, 3),
                ratio_label="without / with snapshots",
                ratio=ratio,
                target=f">= {RATIO_TARGET:.0f}x",
                target_met=at_least(ratio, RATIO_TARGET),
            ),
        ],
    )
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events in the stream")
    parser.add_argument("--every", type=int, default=100, help="snapshot_every")
    parser.add_argument("--loads", type=int, default=20, help="loads measured (median kept)")
    parser.add_argument("--writes", type=int, default=2000, help="writes of each kind a round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of writes; best kept")
    parser.add_argument(
        "--database-url", default=ADMIN_URL, help="admin URL to create and drop the bench database"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1,000 events, 4 loads, 100 writes (its ratios are not the targets')",
    )
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.loads, args.writes, args.rounds = 1_000, 4, 100, 1
    return args


if __name__ == "__main__":
    sys.exit(main())
