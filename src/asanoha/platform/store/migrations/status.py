"""Is the database's schema what the code expects? Checked by every command at start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import inspect

from asanoha.platform.model import Registry
from asanoha.platform.store.database import Database
from asanoha.platform.store.migrations.revisions import (
    APP_VERSION_TABLE,
    PLATFORM_VERSION_TABLE,
    app_head,
    database_revision,
    platform_head,
)
from asanoha.platform.store.tables import build_tables


@dataclass(frozen=True)
class SchemaStatus:
    """What a database lacks; empty tuples and matching revisions mean it is current."""

    platform_revision: str | None
    platform_head: str
    app_revision: str | None = None
    app_head: str | None = None
    missing_tables: tuple[str, ...] = ()
    missing_columns: tuple[str, ...] = ()

    @property
    def platform_is_current(self) -> bool:
        """Whether the platform tables are at the newest platform migration."""
        return self.platform_revision == self.platform_head

    @property
    def is_current(self) -> bool:
        """Whether every table and column the code uses exists."""
        return (
            self.platform_is_current
            and self.app_revision == self.app_head
            and not self.missing_tables
            and not self.missing_columns
        )

    def problems(self) -> list[str]:
        """One line per difference, for the refusal message and ``migrate check``."""
        lines = []
        if not self.platform_is_current:
            lines.append(
                f"platform tables at revision {self.platform_revision or 'none'}, "
                f"the code needs {self.platform_head}"
            )
        if self.app_revision != self.app_head:
            lines.append(
                f"application migrations at revision {self.app_revision or 'none'}, "
                f"the newest is {self.app_head}"
            )
        lines += [f"entity table {name} does not exist" for name in self.missing_tables]
        lines += [f"column {name} does not exist" for name in self.missing_columns]
        return lines


def schema_status(
    registry: Registry, database: Database, app_migrations: Path | None = None
) -> SchemaStatus:
    """Compare the database with the platform's migrations and the registry's entity tables.

    Entity tables are compared by name and columns only: a missing column is what breaks
    writes and reads (``UndefinedColumn``); other differences are for the migration author.
    """
    expected = build_tables(registry)
    newest_app_revision = app_head(app_migrations) if app_migrations is not None else None
    with database.connect() as conn:
        platform_revision = database_revision(conn, PLATFORM_VERSION_TABLE)
        app_revision = (
            database_revision(conn, APP_VERSION_TABLE) if newest_app_revision is not None else None
        )
        inspector = inspect(conn)
        present = set(inspector.get_table_names())
        missing_tables, missing_columns = [], []
        for table in expected.entities.values():
            if table.name not in present:
                missing_tables.append(table.name)
                continue
            columns = {column["name"] for column in inspector.get_columns(table.name)}
            missing_columns += [
                f"{table.name}.{column.name}"
                for column in table.columns
                if column.name not in columns
            ]
    return SchemaStatus(
        platform_revision=platform_revision,
        platform_head=platform_head(),
        app_revision=app_revision,
        app_head=newest_app_revision,
        missing_tables=tuple(missing_tables),
        missing_columns=tuple(missing_columns),
    )
