"""The platform's migrations build exactly the tables the code declares, on both databases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from asanoha.platform.model import Registry
from asanoha.platform.schema import bring_schema_up_to_date
from asanoha.platform.store import Database
from asanoha.platform.store.migrations import (
    PLATFORM_VERSION_TABLE,
    database_revision,
    platform_head,
    upgrade_platform,
)
from asanoha.platform.store.migrations.runner import (
    BASELINE_REVISION,
    PLATFORM_FOLDER,
    make_config,
    platform_metadata,
    platform_target,
)
from asanoha.testing.databases import TestDatabase


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest) -> Iterator[Database]:
    """An empty database of the parametrized kind."""
    made = TestDatabase.create(request.param, f"asanoha_mig_{uuid.uuid4().hex[:12]}")
    database = Database(made.url)
    try:
        yield database
    finally:
        database.dispose()
        made.drop()


def differences(database: Database) -> list[Any]:
    """What autogenerate would change to make the database match ``build_tables``."""

    def platform_only(obj: Any, name: str | None, kind: str, reflected: bool, _: Any) -> bool:
        if kind == "table":
            return name != PLATFORM_VERSION_TABLE
        # tx_id comes from the Postgres backend's own DDL, in the migration and for tables made
        # from the code.
        return not (kind == "column" and name == "tx_id")

    with database.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": platform_only, "compare_type": True}
        )
        return list(compare_metadata(context, platform_metadata()))


@pytest.mark.filterwarnings("ignore:Did not recognize type 'xid8'")
def test_the_migrations_head_matches_the_declared_platform_tables(database: Database) -> None:
    # Fails when someone changes build_tables without a migration: write one in
    # src/asanoha/platform/store/migrations/versions (see docs/guides/migrations.md).
    with database.begin() as conn:
        upgrade_platform(conn)
    assert differences(database) == []


@pytest.mark.filterwarnings("ignore:Did not recognize type 'xid8'")
def test_tables_made_from_the_code_equal_the_migrations_and_record_the_newest_revision(
    database: Database,
) -> None:
    # An empty database gets the platform tables from the code, not from the migrations.
    upgrade = bring_schema_up_to_date(Registry([]), database, migrations=None, may_change=True)
    assert upgrade.platform_before is None and upgrade.status.is_current
    assert differences(database) == []
    with database.begin() as conn:
        assert database_revision(conn, PLATFORM_VERSION_TABLE) == platform_head()
        assert upgrade_platform(conn) == (platform_head(), platform_head())


def test_tables_made_before_revisions_were_recorded_are_adopted(database: Database) -> None:
    # Such a database has the baseline's tables (create_all of that time).
    with database.begin() as conn:
        command.upgrade(
            make_config(PLATFORM_FOLDER, platform_target(), connection=conn), BASELINE_REVISION
        )
    with database.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE {PLATFORM_VERSION_TABLE}")
    with database.begin() as conn:
        assert upgrade_platform(conn) == (None, platform_head())
    with database.connect() as conn:
        assert PLATFORM_VERSION_TABLE in inspect(conn).get_table_names()


def test_run_ids_are_never_reused_on_sqlite_whichever_way_the_tables_were_made() -> None:
    # Postgres identities never go back; SQLite's rowid does unless the table says
    # AUTOINCREMENT.
    made = [TestDatabase.create("sqlite", f"asanoha_mig_{uuid.uuid4().hex[:12]}") for _ in "ab"]
    migrated, from_code = (Database(m.url) for m in made)
    try:
        with migrated.begin() as conn:
            upgrade_platform(conn)
        bring_schema_up_to_date(Registry([]), from_code, migrations=None, may_change=True)
        for db in (migrated, from_code):
            with db.connect() as conn:
                ddl = conn.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE name = 'asanoha_job_runs'"
                ).scalar_one()
            assert "AUTOINCREMENT" in ddl
    finally:
        for db, m in zip((migrated, from_code), made, strict=True):
            db.dispose()
            m.drop()
