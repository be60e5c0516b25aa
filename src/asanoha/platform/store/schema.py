"""Create the platform's and the registry's tables."""

from __future__ import annotations

from sqlalchemy import Engine

from asanoha.platform.model import Registry
from asanoha.platform.store.backends import backend_for
from asanoha.platform.store.database import Database
from asanoha.platform.store.tables import Tables, build_tables


def create_all(
    registry: Registry, target: Database | Engine, tables: Tables | None = None
) -> Tables:
    """Create every missing table (idempotent) on a ``Database`` or a SQLAlchemy ``Engine``."""
    tables = tables or build_tables(registry)
    engine = target.engine if isinstance(target, Database) else target
    with engine.begin() as conn:
        tables.metadata.create_all(conn)
        backend_for(engine.url).after_create(conn)
    return tables
