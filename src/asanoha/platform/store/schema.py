"""Create the platform's and the registry's tables."""

from __future__ import annotations

from asanoha.platform.model import Registry
from asanoha.platform.store.database import Database
from asanoha.platform.store.tables import Tables, build_tables


def create_all(registry: Registry, database: Database, tables: Tables | None = None) -> Tables:
    """Create every missing table (idempotent) and return the table set."""
    tables = tables or build_tables(registry)
    with database.begin() as conn:
        tables.metadata.create_all(conn)
        database.backend.after_create(conn)
    return tables
