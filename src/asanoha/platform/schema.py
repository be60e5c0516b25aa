"""The one path from a database to the code's schema, for every command and ``App.create_schema``.

Three steps, always in this order:

1. the platform's tables to the newest platform revision (made from the code on an empty
   database, else through the platform's migrations);
2. the application's entity tables through its migrations, or, while the project has none,
   by creating the tables that do not exist yet;
3. the cursor rows of the consumers, written with the newest platform columns (so after 1).

Steps 1 and 2 run in one transaction; step 3 once the database is found current.

A caller that may not change the schema (``serve``, ``worker``, ``mcp``, ``beat`` on Postgres)
gets the same check and cursor rows without steps 1 and 2, and without loading Alembic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, inspect

from asanoha.platform.consumers.job_triggers import consumer_definitions
from asanoha.platform.consumers.registration import register_cursors
from asanoha.platform.model import Registry
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.database import Database
from asanoha.platform.store.migrations.revisions import (
    APP_VERSION_TABLE,
    PLATFORM_VERSION_TABLE,
    app_head,
    database_revision,
    platform_head,
)
from asanoha.platform.store.migrations.status import SchemaStatus, schema_status
from asanoha.platform.store.schema import create_missing_entity_tables, create_platform_tables
from asanoha.platform.store.tables import Tables, build_tables
from asanoha.platform.store.upcasting import check_stored_versions

#: Where the application's own migrations live unless told otherwise (from the working
#: directory, as ``asanoha migrate`` reads it).
DEFAULT_APP_MIGRATIONS = Path("migrations")


@dataclass(frozen=True)
class SchemaUpgrade:
    """What ``bring_schema_up_to_date`` did, and the database's state afterwards."""

    #: The database compared with the code after the steps ran.
    status: SchemaStatus
    #: Whether the caller only checked (``may_change=False``): nothing was changed.
    checked_only: bool = False
    #: The platform revision before (``None``: an empty database).
    platform_before: str | None = None
    #: The application revision before and after, when the project has migrations.
    app_before: str | None = None
    app_after: str | None = None
    #: Entity tables made from the code (a project without migrations).
    created_tables: tuple[str, ...] = ()
    #: Consumers whose cursor row was written now.
    registered_consumers: tuple[str, ...] = ()

    @property
    def uses_app_migrations(self) -> bool:
        """Whether the entity tables follow the application's migrations."""
        return self.status.app_head is not None


class SchemaBehindError(RuntimeError):
    """The database lacks what the code uses, and this caller could not or may not fix it."""

    def __init__(self, status: SchemaStatus) -> None:
        self.status = status
        super().__init__("the database schema is behind the code: " + "; ".join(status.problems()))


def bring_schema_up_to_date(
    registry: Registry,
    database: Database,
    *,
    migrations: Path | None = DEFAULT_APP_MIGRATIONS,
    may_change: bool,
    job_trigger_partitions: int | None = None,
) -> SchemaUpgrade:
    """Bring ``database`` to the schema of ``registry`` (see the module); with
    ``may_change=False`` only check it. Returns what was done and the status after it.

    ``migrations`` is the application's migrations folder; while it holds no revision (or is
    ``None``) the entity tables are made from the code. The caller decides what to do with a
    status that is still behind (refuse to start, print the remedy, raise). Stored events of a
    version the code cannot bring to its own raise ``UnreadableEventVersionError``.
    ``job_trigger_partitions``: the partitions a new job-trigger consumer gets (default: the
    setting from the environment).
    """
    tables = build_tables(registry)
    changes = _Changes()
    if may_change:
        with database.begin() as conn:
            changes = _change(conn, database.backend, registry, tables, migrations)
    status = schema_status(registry, database, migrations)
    registered: tuple[str, ...] = ()
    if status.is_current:
        # Stored events the code cannot read stop the start (UnreadableEventVersionError).
        with database.connect() as conn:
            check_stored_versions(conn, tables)
        registered = _register_consumers(database, registry, tables, job_trigger_partitions)
    return SchemaUpgrade(
        status=status,
        checked_only=not may_change,
        platform_before=changes.platform_before,
        app_before=changes.app_before,
        app_after=changes.app_after,
        created_tables=changes.created_tables,
        registered_consumers=registered,
    )


@dataclass(frozen=True)
class _Changes:
    platform_before: str | None = None
    app_before: str | None = None
    app_after: str | None = None
    created_tables: tuple[str, ...] = ()


def _change(
    conn: Connection,
    backend: Backend,
    registry: Registry,
    tables: Tables,
    migrations: Path | None,
) -> _Changes:
    """Steps 1 and 2 on ``conn`` (one transaction: a failing step leaves nothing behind)."""
    platform_before = _upgrade_platform(conn, backend, tables)
    newest = app_head(migrations) if migrations is not None else None
    if migrations is None or newest is None:
        created = create_missing_entity_tables(conn, tables)
        return _Changes(platform_before=platform_before, created_tables=tuple(created))
    app_before = app_after = database_revision(conn, APP_VERSION_TABLE)
    if app_before != newest:
        # Alembic is loaded only when there is something to run.
        from asanoha.platform.store.migrations.runner import upgrade_app

        app_before, app_after = upgrade_app(conn, migrations, registry)
    return _Changes(platform_before=platform_before, app_before=app_before, app_after=app_after)


def _upgrade_platform(conn: Connection, backend: Backend, tables: Tables) -> str | None:
    """Step 1; returns the platform revision the database had."""
    before = database_revision(conn, PLATFORM_VERSION_TABLE)
    if before == platform_head():
        return before
    if before is None and not inspect(conn).has_table(tables.events.name):
        create_platform_tables(conn, backend, tables)
        return None
    from asanoha.platform.store.migrations.runner import upgrade_platform

    return upgrade_platform(conn)[0]


def _register_consumers(
    database: Database, registry: Registry, tables: Tables, job_trigger_partitions: int | None
) -> tuple[str, ...]:
    """Step 3: the cursor rows of consumers that have none (rows only, no DDL)."""
    definitions = consumer_definitions(registry, job_trigger_partitions)
    if not definitions:
        return ()
    with database.begin() as conn:
        return tuple(register_cursors(conn, database.backend, tables, definitions))
