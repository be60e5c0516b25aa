"""Rebuild rate: a guarded rebuild (shadow table, catch-up, swap) of an entity with a personal
field, against ``rebuild_projection`` replaying the same events in one transaction.

    .venv/bin/python bench/rebuild.py [--events 100000] [--rounds 2] [--quick]

The events are written through the service (a create and an update per row, with the personal
value sealed as the write path stores it), then copied in SQL to reach ``--events`` (each copy
a stream of its own). Each round rebuilds the whole table; the best round counts. The
process's own CPU time per event is printed too: on a machine that other work keeps busy the
rate measures the contention, that figure does not. The database is created for the run and
dropped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import ADMIN_URL, describe_setup, scratch_database
from _results import Figure, at_least, safe_ratio, write_figures
from asanoha import Access, App, Entity, Feature, SessionUser, Settings, fields
from asanoha.platform.store import rebuild_projection
from asanoha.platform.store.rebuild import rebuild_guarded

RATE_TARGET = 15_000
RATIO_TARGET = 0.7
FEATURE = "rebuild"
KEY = f"{FEATURE}:contact"
WRITER = Access(roles=["writer"])
USER = SessionUser.of("bench-user", "bench-tenant", ["writer"])
#: Rows written through the service; the rest are copies of their events.
WRITTEN = 500

COPY = """
INSERT INTO asanoha_events (stream_id, stream_type, tenant_id, version, type, schema_version,
                            payload, metadata, created_at, created_by)
SELECT md5(e.stream_id || ':' || g)::uuid::text, e.stream_type, e.tenant_id, e.version, e.type,
       e.schema_version, e.payload, e.metadata, e.created_at, e.created_by
FROM asanoha_events e, generate_series(1, %(copies)s) g
WHERE e.stream_type = %(key)s
ORDER BY g, e.id
"""


def contact_feature() -> Feature:
    """One entity with a personal field (sealed when the store seals personal values)."""
    feature = Feature(FEATURE)
    contact = Entity(
        table="rebuild_contacts",
        fields={
            "email": fields.text(personal="self"),
            "name": fields.text(personal=False, reason="benchmark data"),
            "amount": fields.integer(),
        },
    )
    feature.crud("contact", contact, write=WRITER, read=WRITER, verbs=["create", "update"])
    return feature


def seed(app: App, events: int) -> int:
    """Write ``WRITTEN`` rows (two events each), copy their events up to ``events``; return
    how many events the entity's streams hold."""
    for n in range(WRITTEN):
        row = app.service.dispatch_write(
            f"{FEATURE}:write:contact:create",
            {"email": f"person{n}@example.com", "name": f"person {n}", "amount": n},
            USER,
        )
        app.service.dispatch_write(
            f"{FEATURE}:write:contact:update",
            {"id": str(row["id"]), "version": 1, "changes": {"amount": n + 1}},
            USER,
        )
    copies = max(0, events // (2 * WRITTEN) - 1)
    with app.database.begin() as conn:
        conn.exec_driver_sql(COPY, {"copies": copies, "key": KEY})
        rebuild_projection(conn, app.service.tables, app.registry.entity(KEY))
    return 2 * WRITTEN * (copies + 1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with scratch_database(args.database_url, "asanoha_bench_rebuild") as url:
        app = App([contact_feature()], Settings(database_url=url), publish_jobs=False)
        app.create_schema(migrations=None)
        stored = seed(app, args.events)
        print(f"rebuild of {stored:,} events ({2 * WRITTEN} written); {describe_setup(url)}")
        entity_def = app.registry.entity(KEY)
        guarded, plain, cpu = [], [], []
        for _ in range(args.rounds):
            started, cpu_started = time.perf_counter(), time.process_time()
            result = rebuild_guarded(app.database, app.service.tables, entity_def)
            guarded.append(result.replayed / (time.perf_counter() - started))
            cpu.append(1e6 * (time.process_time() - cpu_started) / result.replayed)
            started = time.perf_counter()
            with app.database.begin() as conn:
                replayed = rebuild_projection(conn, app.service.tables, entity_def)
            plain.append(replayed / (time.perf_counter() - started))
        app.database.dispose()
    rate, peer = max(guarded), max(plain)
    ratio = safe_ratio(rate, peer)
    print(
        f"  guarded rebuild (shadow, catch-up, swap)  {rate:10,.0f} events/s   target >= {RATE_TARGET:,}"
    )
    print(f"  this process's CPU per event (best round) {min(cpu):10.1f} µs")
    print(f"  rebuild_projection (one transaction)      {peer:10,.0f} events/s")
    print(
        f"  guarded / in place                        {ratio or 0:10.2f}   target >= {RATIO_TARGET}"
    )
    write_figures(
        args.json,
        [
            Figure(
                benchmark="rebuild",
                name=f"guarded rebuild of {stored:,} events (a personal field)",
                value=round(rate),
                unit="events/s",
                peer="rebuild_projection, in place in one transaction",
                peer_value=round(peer),
                ratio_label="guarded / in place",
                ratio=ratio,
                target=f">= {RATE_TARGET:,} events/s",
                target_met=rate >= RATE_TARGET and bool(at_least(ratio, 0)),
            )
        ],
    )
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events to rebuild from")
    parser.add_argument("--rounds", type=int, default=2, help="rebuilds of each; best kept")
    parser.add_argument(
        "--database-url", default=ADMIN_URL, help="admin URL to create and drop the bench database"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 10,000 events, one round")
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rounds = 10_000, 1
    return args


if __name__ == "__main__":
    sys.exit(main())
