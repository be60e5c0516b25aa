"""Create the platform's and the registry's tables."""

from __future__ import annotations

from sqlalchemy import Engine, inspect

from asanoha.platform.model import Registry
from asanoha.platform.store.backends import backend_for
from asanoha.platform.store.database import Database
from asanoha.platform.store.tables import Tables, build_tables


def create_all(
    registry: Registry, target: Database | Engine, tables: Tables | None = None
) -> Tables:
    """Create every missing table (idempotent) on a ``Database`` or a SQLAlchemy ``Engine``.

    Platform tables made here are at the newest migration and are recorded so, so that
    ``asanoha migrate`` later continues from there instead of creating them again.
    """
    tables = tables or build_tables(registry)
    engine = target.engine if isinstance(target, Database) else target
    with engine.begin() as conn:
        is_new = not inspect(conn).has_table(tables.events.name)
        tables.metadata.create_all(conn)
        backend_for(engine.url).after_create(conn)
        if is_new:
            # Imported here: Alembic is only needed by processes that make schemas.
            from asanoha.platform.store.migrations import record_platform_head

            record_platform_head(conn)
    return tables
