"""Make tables from the code's declarations: the steps of ``bring_schema_up_to_date`` that
need no migration (``asanoha.platform.schema`` decides when they run)."""

from __future__ import annotations

from sqlalchemy import Connection, inspect

from asanoha.platform.store.backends import Backend
from asanoha.platform.store.migrations.revisions import record_platform_head
from asanoha.platform.store.tables import Tables


def create_platform_tables(conn: Connection, backend: Backend, tables: Tables) -> None:
    """Make the platform's tables on a database that has none, recorded at the newest
    platform revision (the migrations' result is the same; a test compares them).

    Faster than running every platform migration, which a fresh test database would pay.
    """
    entities = set(tables.entities.values())
    platform = [table for table in tables.metadata.sorted_tables if table not in entities]
    tables.metadata.create_all(conn, tables=platform)
    backend.after_create(conn)
    record_platform_head(conn)


def create_missing_entity_tables(conn: Connection, tables: Tables) -> list[str]:
    """Make the entity tables (and declared projections' tables) that do not exist yet (with
    their indexes); return their names.

    Existing tables are left as they are: a new column needs a migration.
    """
    present = set(inspect(conn).get_table_names())
    missing = [table for table in tables.entities.values() if table.name not in present]
    tables.metadata.create_all(conn, tables=missing, checkfirst=False)
    # Declared projections' tables are declared in the application's own metadata.
    followers = [table for table in tables.projections.values() if table.name not in present]
    for table in followers:
        table.create(conn)
    return [table.name for table in [*missing, *followers]]
