"""SQLite: readers take no write lock, :memory: is one database, decimals stay exact."""

from __future__ import annotations

import decimal
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, Table, select

from asanoha import Access, App, Entity, Feature, SessionUser, fields
from asanoha.platform.settings import Settings
from asanoha.platform.store import Database
from asanoha.platform.store.tables import ExactDecimal

ADMIN = Access(roles=["Admin"])
ALICE = SessionUser.of("alice", "acme", ["Admin"])


def ledger() -> Feature:
    feature = Feature("ledger")
    entry = Entity(
        table="ledger_entries",
        fields={"amount": fields.decimal(sortable=True, filterable=True), "n": fields.integer()},
    )
    feature.crud("entry", entry, write=ADMIN, read=ADMIN)
    return feature


def test_a_write_does_not_wait_for_an_open_read(tmp_path: Path) -> None:
    database = Database(f"sqlite+pysqlite:///{tmp_path / 'locks.sqlite3'}")
    table = Table("counters", MetaData(), Column("n", Integer))
    with database.begin() as conn:
        table.create(conn)
    for opened, read in ((database.connect, 0), (database.read_only, 1)):
        with opened() as reader:
            # The read transaction is open.
            assert len(reader.execute(select(table)).all()) == read
            # Before, the reader's BEGIN IMMEDIATE held the write lock and this waited it out.
            with database.begin() as writer:
                writer.execute(table.insert().values(n=1))
            # Its snapshot is unchanged.
            assert len(reader.execute(select(table)).all()) == read
    database.dispose()


def test_an_in_memory_database_is_shared_by_every_connection() -> None:
    app = App([ledger()], Settings(database_url="sqlite:///:memory:"))
    app.create_schema()
    created = app.service.dispatch_write("ledger:write:entry:create", {"n": 1}, ALICE)
    listed = app.service.dispatch_query("ledger:query:entry:list", {}, ALICE)
    assert [row["id"] for row in listed["rows"]] == [created["id"]]
    app.close()


def test_decimals_keep_every_digit_and_match_their_event(tmp_path: Path) -> None:
    app = App([ledger()], Settings(database_url=f"sqlite:///{tmp_path / 'ledger.sqlite3'}"))
    app.create_schema()
    exact = decimal.Decimal("123456789012345678901234567.0123456789")
    created = app.service.dispatch_write("ledger:write:entry:create", {"amount": str(exact)}, ALICE)
    assert created["amount"] == exact
    listed = app.service.dispatch_query("ledger:query:entry:list", {}, ALICE)
    assert listed["rows"][0]["amount"] == exact
    with app.database.connect() as conn:
        payload = conn.execute(select(app.service.tables.events.c.payload)).scalar_one()
    assert decimal.Decimal(payload["data"]["amount"]) == listed["rows"][0]["amount"]
    app.close()


def test_decimals_filter_exactly_and_sort_by_value_on_sqlite(tmp_path: Path) -> None:
    app = App([ledger()], Settings(database_url=f"sqlite:///{tmp_path / 'ledger.sqlite3'}"))
    app.create_schema()
    for amount in ("9.5", "10", "-2.25", "100.0000000001"):
        app.service.dispatch_write("ledger:write:entry:create", {"amount": amount}, ALICE)

    def amounts(**query: object) -> list[decimal.Decimal]:
        rows = app.service.dispatch_query("ledger:query:entry:list", query, ALICE)["rows"]
        return [row["amount"] for row in rows]

    d = decimal.Decimal
    assert amounts(sort=["amount"]) == [d("-2.25"), d("9.5"), d("10"), d("100.0000000001")]
    assert amounts(filter={"amount": "10.00"}) == [d("10")]
    assert amounts(filter={"amount": {"gt": "9.6"}}, sort=["-amount"]) == [
        d("100.0000000001"),
        d("10"),
    ]
    app.close()


def test_the_decimal_column_is_numeric_on_postgres_and_text_on_sqlite() -> None:
    from sqlalchemy.dialects import postgresql, sqlite

    assert str(ExactDecimal().load_dialect_impl(postgresql.dialect())) == "NUMERIC(38, 10)"
    assert str(ExactDecimal().load_dialect_impl(sqlite.dialect())) == "TEXT"


def test_pre_ping_setting_reaches_the_engine() -> None:
    for pre_ping in (True, False):
        app = App([], Settings(database_url="sqlite:///:memory:", database_pre_ping=pre_ping))
        assert app.database.engine.pool._pre_ping is pre_ping
        app.close()
