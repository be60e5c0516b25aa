"""Compiled inserts write what ``Connection.execute`` of the same insert writes, and are seen
by the statement events like any other statement."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    Integer,
    MetaData,
    String,
    Table,
    insert,
    select,
)

from asanoha.platform.store.inserts import compile_insert, execute_insert
from asanoha.platform.store.tables import ExactDecimal, Json, Timestamp


def every_kind_table() -> Table:
    return Table(
        "compiled_insert_rows",
        MetaData(),
        Column("id", String(36), primary_key=True),
        Column("body", Json),
        Column("at", Timestamp),
        Column("amount", ExactDecimal()),
        Column("count", BigInteger()),
        Column("flag", Boolean()),
        Column("day", Date()),
    )


def a_row(row_id: str) -> dict[str, Any]:
    return {
        "id": row_id,
        "body": {"nested": [1, "two", None], "text": "ä"},
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.UTC),
        "amount": decimal.Decimal("12.3400000001"),
        "count": 2**40,
        "flag": True,
        "day": dt.date(2026, 2, 3),
    }


def test_a_compiled_insert_stores_the_same_values_as_core(core: Any) -> None:
    table = every_kind_table()
    table.create(core.db.engine)
    with core.db.begin() as conn:
        execute_insert(conn, table, a_row("compiled"))
        conn.execute(insert(table), a_row("core"))
    with core.db.connect() as conn:
        rows = {row["id"]: dict(row) for row in conn.execute(select(table)).mappings()}
    compiled, core_row = rows.pop("compiled"), rows.pop("core")
    assert {**compiled, "id": "core"} == core_row
    assert compiled == a_row("compiled")


def test_a_compiled_insert_returns_the_returned_key_and_none_on_conflict(core: Any) -> None:
    key = str(uuid.uuid4())
    row = {
        "stream_id": key,
        "stream_type": "test",
        "tenant_id": "tenant-a",
        "version": 1,
        "type": "test:event:thing.created",
        "schema_version": 1,
        "payload": {},
        "metadata": {},
        "created_at": dt.datetime.now(dt.UTC),
        "created_by": "someone",
    }
    backend = core.db.backend
    with core.db.begin() as conn:
        first = backend.insert_unless_exists(conn, core.tables.events, row)
        second = backend.insert_unless_exists(conn, core.tables.events, row)
    assert isinstance(first, int)
    assert second is None


def test_statement_events_see_compiled_inserts(core: Any) -> None:
    table = every_kind_table()
    table.create(core.db.engine)
    with core.capture_writes() as captured, core.db.begin() as conn:
        execute_insert(conn, table, a_row("seen"))
    assert len(captured) == 1
    assert captured[0].startswith("INSERT INTO compiled_insert_rows")


def test_an_insert_with_a_python_side_default_is_left_to_core(core: Any) -> None:
    table = Table(
        "compiled_insert_defaults",
        MetaData(),
        Column("id", String(36), primary_key=True),
        Column("level", Integer, default=7),
    )
    table.create(core.db.engine)
    assert compile_insert(insert(table), core.db.engine.dialect, ["id"]) is None
    with core.db.begin() as conn:
        execute_insert(conn, table, {"id": "a"})
    with core.db.connect() as conn:
        assert conn.execute(select(table.c.level)).scalar_one() == 7


def test_an_insert_outside_a_transaction_begins_one_that_commit_ends(core: Any) -> None:
    table = every_kind_table()
    table.create(core.db.engine)
    with core.db.engine.connect() as conn:
        execute_insert(conn, table, a_row("autobegun"))
        assert conn.in_transaction()
        conn.commit()
    with core.db.connect() as conn:
        assert conn.execute(select(table.c.id)).scalar_one() == "autobegun"
