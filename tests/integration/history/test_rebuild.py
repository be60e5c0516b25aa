"""Guarded rebuilds: a shadow table, the writes made meanwhile, orphan rows, the swap."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import insert, inspect, select

from asanoha import ConflictError, SessionUser
from asanoha.platform.store import rebuild_projection
from asanoha.platform.store.rebuild import RebuildProgress, kept_name, rebuild_guarded, shadow_name
from tests.integration.history.conftest import CUSTOMER, FEATURE, crm

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
ADMIN_A = SessionUser.of("admin-a", TENANT_A, ["Admin"])
ADMIN_B = SessionUser.of("admin-b", TENANT_B, ["Admin"])
WRITE = f"{FEATURE}:write:customer:"
TABLE = "crm_customers"
#: Events of the rebuild that runs beside writes (100,000 took about 20 s here).
#: Events a long rebuild replays, in ``REPLAY_BATCH``-sized batches (at least ten, with
#: writes between every two).
EVENTS = 30_000
REPLAY_BATCH = 2_000


def create(stack: Any, first: str, user: SessionUser = ADMIN_A) -> dict[str, Any]:
    row: dict[str, Any] = stack.service.dispatch_write(
        WRITE + "create", {"first_name": first, "last_name": "x"}, user
    )
    return row


def rows(stack: Any, tenant_id: str | None = None) -> dict[str, tuple[Any, ...]]:
    """The entity's rows by id: every column but the timestamps' precision-dependent text."""
    table = stack.tables.entity(CUSTOMER)
    query = select(table).order_by(table.c.tenant_id, table.c.id)
    if tenant_id is not None:
        query = query.where(table.c.tenant_id == tenant_id)
    with stack.db.connect() as conn:
        return {str(row.id): tuple(row) for row in conn.execute(query)}


def insert_orphan(stack: Any, tenant_id: str = TENANT_A) -> str:
    """A row that no event wrote (as a hand-made SQL fix would leave it)."""
    row_id = uuid.uuid4()
    now = dt.datetime.now(dt.UTC)
    values = {
        "id": row_id,
        "tenant_id": tenant_id,
        "version": 1,
        "created_at": now,
        "created_by": "sql",
        "modified_at": now,
        "modified_by": "sql",
        "first_name": "orphan",
        "last_name": "x",
        "tier": "basic",
    }
    with stack.db.begin() as conn:
        conn.execute(insert(stack.tables.entity(CUSTOMER)), values)
    return str(row_id)


def table_names(stack: Any) -> set[str]:
    with stack.db.connect() as conn:
        return set(inspect(conn).get_table_names())


def test_an_orphan_row_stops_the_rebuild_with_its_id(history_stack: Any) -> None:
    stack = history_stack([crm()])
    create(stack, "Ada")
    orphan = insert_orphan(stack)
    before = rows(stack)
    entity_def = stack.registry.entity(CUSTOMER)

    with pytest.raises(ConflictError) as raised:
        rebuild_guarded(stack.db, stack.tables, entity_def)
    assert raised.value.reason == "projection_orphan_rows"
    assert raised.value.details["ids"] == [orphan]
    assert orphan in str(raised.value)
    assert rows(stack) == before
    assert shadow_name(TABLE) not in table_names(stack)

    with pytest.raises(ConflictError, match=orphan), stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, entity_def)
    assert rows(stack) == before

    result = rebuild_guarded(stack.db, stack.tables, entity_def, drop_orphans=True)
    assert result.dropped_orphans == (orphan,)
    assert set(rows(stack)) == set(before) - {orphan}


@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique-index"])
def test_the_swap_keeps_the_old_table_only_when_asked(history_stack: Any, unique: bool) -> None:
    stack = history_stack([crm(unique=unique)])
    for name in ("Ada", "Grace", "Alan"):
        create(stack, name)
    before = rows(stack)
    entity_def = stack.registry.entity(CUSTOMER)
    with stack.db.connect() as conn:
        indexes = {index["name"] for index in inspect(conn).get_indexes(TABLE)}

    result = rebuild_guarded(stack.db, stack.tables, entity_def, keep=True)
    assert result.kept_table == kept_name(TABLE)
    assert rows(stack) == before
    with stack.db.connect() as conn:
        kept = conn.exec_driver_sql(f'SELECT count(*) FROM "{kept_name(TABLE)}"').scalar_one()
        assert kept == 3
        assert {index["name"] for index in inspect(conn).get_indexes(TABLE)} == indexes
    # The swapped table takes writes, its unique index included.
    create(stack, "Edsger")
    if unique:
        with pytest.raises(ConflictError):
            create(stack, "Edsger")

    again = rebuild_guarded(stack.db, stack.tables, entity_def)
    assert again.kept_table is None
    assert kept_name(TABLE) not in table_names(stack)
    assert len(rows(stack)) == 4
    with stack.db.connect() as conn:
        assert {index["name"] for index in inspect(conn).get_indexes(TABLE)} == indexes


def test_a_tenant_rebuild_leaves_other_tenants_alone(history_stack: Any) -> None:
    stack = history_stack([crm()])
    create(stack, "Ada")
    create(stack, "Grace", ADMIN_B)
    orphan_b = insert_orphan(stack, TENANT_B)
    before_b = rows(stack, TENANT_B)
    entity_def = stack.registry.entity(CUSTOMER)

    result = rebuild_guarded(stack.db, stack.tables, entity_def, tenant_id=TENANT_A, keep=True)
    assert result.replayed == 1
    assert result.kept_table == kept_name(TABLE)
    assert rows(stack, TENANT_B) == before_b
    with pytest.raises(ConflictError, match=orphan_b):
        rebuild_guarded(stack.db, stack.tables, entity_def, tenant_id=TENANT_B)


def seed_customers(stack: Any, count: int) -> list[str]:
    """``count`` events: customers created and then updated, stored in bulk; the live table
    is their projection."""
    events = stack.tables.events
    now = dt.datetime.now(dt.UTC)
    ids = [str(uuid.uuid4()) for _ in range(count // 2)]

    def event(stream: str, n: int, version: int) -> dict[str, Any]:
        verb, body = (
            ("created", {"data": {"first_name": f"c{n}", "last_name": "x", "tier": "basic"}})
            if version == 1
            else ("updated", {"changes": {"last_name": f"y{n}"}})
        )
        return {
            "stream_id": stream,
            "stream_type": CUSTOMER,
            "tenant_id": TENANT_A,
            "version": version,
            "type": f"{FEATURE}:event:customer.{verb}",
            "schema_version": 3,
            "payload": body,
            "metadata": {},
            "created_at": now,
            "created_by": "seed",
        }

    with stack.db.begin() as conn:
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            conn.execute(insert(events), [event(s, start + i, 1) for i, s in enumerate(chunk)])
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            conn.execute(insert(events), [event(s, start + i, 2) for i, s in enumerate(chunk)])
        rebuild_projection(conn, stack.tables, stack.registry.entity(CUSTOMER))
    return ids


def test_writes_during_a_long_rebuild_are_all_in_the_swapped_table(
    history_stack: Any,
) -> None:
    stack = history_stack([crm()])
    seeded = seed_customers(stack, EVENTS)
    made: list[str] = []
    updated: dict[str, str] = {}
    deleted: list[str] = []
    reports: list[RebuildProgress] = []

    def write_meanwhile(progress: RebuildProgress) -> None:
        # Between two replay batches: a write to a row already replayed, one to a row the
        # replay has not reached, a new row and a deleted one.
        reports.append(progress)
        if progress.phase != "replay":
            return
        n = len(reports)
        made.append(str(create(stack, f"new{n}")["id"]))
        for stream in (seeded[n], seeded[-n]):
            row = stack.service.dispatch_query(
                f"{FEATURE}:query:customer:detail", {"id": stream}, ADMIN_A
            )
            stack.service.dispatch_write(
                WRITE + "update",
                {"id": stream, "version": row["version"], "changes": {"tier": f"t{n}"}},
                ADMIN_A,
            )
            updated[stream] = f"t{n}"
        stack.service.dispatch_write(WRITE + "delete", {"id": seeded[100 + n]}, ADMIN_A)
        deleted.append(seeded[100 + n])

    entity_def = stack.registry.entity(CUSTOMER)
    result = rebuild_guarded(
        stack.db, stack.tables, entity_def, batch=REPLAY_BATCH, progress=write_meanwhile
    )

    replay_reports = [r for r in reports if r.phase == "replay"]
    assert len(replay_reports) >= 10
    assert reports[-1].phase == "swap"
    assert result.replayed >= EVENTS + len(made)
    after = rows(stack)
    assert set(made) <= set(after)
    assert not set(deleted) & set(after)
    table = stack.tables.entity(CUSTOMER)
    with stack.db.connect() as conn:
        tiers = dict(
            conn.execute(
                select(table.c.id, table.c.tier).where(
                    table.c.id.in_([uuid.UUID(s) for s in updated])
                )
            ).all()
        )
    assert {str(k): v for k, v in tiers.items()} == {
        s: t for s, t in updated.items() if s not in deleted
    }
    # The swapped table is what a replay of every event gives.
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, entity_def)
    assert rows(stack) == after


def test_writers_running_through_a_rebuild_lose_nothing(history_stack: Any) -> None:
    # Writers in threads of their own, some in the middle of a transaction when the swap takes
    # its lock: what they committed is in the swapped table, which equals a replay.
    stack = history_stack([crm()])
    seeded = seed_customers(stack, 20_000)
    stop = threading.Event()
    made: list[str] = []
    failures: list[BaseException] = []

    def write(n: int) -> None:
        # Each writer updates rows of its own: no version conflicts between them.
        own = iter(seeded[n * 1000 : (n + 1) * 1000])
        while not stop.is_set():
            try:
                made.append(str(create(stack, f"w{n}-{len(made)}")["id"]))
                stream = next(own)
                stack.service.dispatch_write(
                    WRITE + "update",
                    {"id": stream, "version": 2, "changes": {"tier": "w"}},
                    ADMIN_A,
                )
            except BaseException as error:
                failures.append(error)
                return

    writers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    try:
        while len(made) < 30 and not failures:
            time.sleep(0.01)
        result = rebuild_guarded(stack.db, stack.tables, stack.registry.entity(CUSTOMER))
        before = len(made)
        while len(made) < before + 30 and not failures:
            time.sleep(0.01)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert failures == []
    assert result.replayed >= 20_000
    after = rows(stack)
    assert set(made) <= set(after)
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity(CUSTOMER))
    assert rows(stack) == after
