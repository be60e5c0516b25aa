"""The one seam between Postgres and SQLite: engine setup, conflict-free append, extra DDL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Float,
    String,
    Table,
    bindparam,
    cast,
    create_engine,
    event,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool

from asanoha.platform.store.inserts import execute_bound, execute_insert
from asanoha.platform.store.liveness import check_before_use

#: Execution option of a connection whose transactions only read (no write lock on SQLite).
READS_ONLY = "asanoha_reads_only"


#: Postgres: a lock was not granted within lock_timeout.
LOCK_NOT_AVAILABLE = "55P03"


class LockWaitTimeout(Exception):
    """A row another transaction holds was not released in time."""


class Backend(Protocol):
    """What differs between the supported databases."""

    name: str

    def create_engine(self, url: URL, pool_size: int, pre_ping: bool = True) -> Engine:
        """An engine configured for the platform's transaction pattern."""

    def insert_unless_exists(self, conn: Connection, table: Table, row: dict[str, Any]) -> Any:
        """Insert ``row`` and return its primary key; ``None`` when a unique key exists already."""

    def insert_pair_unless_exists(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        companion: Table,
        companion_row: dict[str, Any],
    ) -> tuple[Any, bool]:
        """``insert_unless_exists`` of ``companion_row`` into ``companion`` and of ``row``
        into ``table``: ``row``'s key (``None`` when it exists) and whether the companion was
        inserted. Postgres sends both in one statement."""

    def after_create(self, conn: Connection) -> None:
        """DDL the portable table definitions cannot express."""

    def start_read_only(self, conn: Connection) -> None:
        """Begin a transaction on ``conn`` in which the database refuses every write."""

    def start_reads(self, conn: Connection) -> None:
        """Mark ``conn`` as a reader: its transactions take no write lock."""

    def comparable(self, expression: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """``expression`` (a column or value of a field of ``kind``) as it orders and compares."""

    def minute_of(self, expression: ColumnElement[Any]) -> ColumnElement[str]:
        """The UTC minute of a timestamp column as text, ``YYYY-MM-DDTHH:MM``: rows grouped by
        it are counted per minute in the database."""

    def insert_or_update(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        changes: dict[str, Any],
        where: ColumnElement[bool],
    ) -> None:
        """Insert ``row``, or when its primary key exists set ``changes`` on that row if it
        meets ``where``: one statement, so no writer can slip in between the two."""

    def insert_waiting_at_most(
        self, conn: Connection, table: Table, row: dict[str, Any], seconds: float
    ) -> Any:
        """``insert_unless_exists``, waiting at most ``seconds`` for a concurrent inserter of
        the same key; ``LockWaitTimeout`` when it waited that long."""


class PostgresBackend:
    """Postgres: a connection pool; the writing transaction id on every event."""

    name = "postgresql"

    def create_engine(self, url: URL, pool_size: int, pre_ping: bool = True) -> Engine:
        # Pre-ping is on by default: without it a server restart (or a network that drops idle
        # connections) fails one call per stale pooled connection. ``liveness`` pings only a
        # connection that may be dead (bench/pre_ping.py measures the cost); recycling bounds
        # the age of idle ones.
        engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800)
        if pre_ping:
            check_before_use(engine)
        return engine

    def insert_unless_exists(self, conn: Connection, table: Table, row: dict[str, Any]) -> Any:
        # ON CONFLICT DO NOTHING waits for a concurrent inserter of the same key and then
        # yields nothing: exactly one writer of a stream version wins, and the loser's
        # transaction stays usable (no aborted-transaction state to roll back).
        return _insert_unless_exists(conn, table, row, postgresql.insert)

    def insert_or_update(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        changes: dict[str, Any],
        where: ColumnElement[bool],
    ) -> None:
        # A concurrent inserter of the key is waited for, then its row is updated.
        _insert_or_update(conn, table, row, changes, where, postgresql.insert)

    def insert_pair_unless_exists(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        companion: Table,
        companion_row: dict[str, Any],
    ) -> tuple[Any, bool]:
        # One round trip: the companion's INSERT is a data-modifying CTE of the row's.
        values = {**row, **{_companion_name(key): value for key, value in companion_row.items()}}
        found = execute_bound(
            conn,
            table,
            values,
            kind=("pair", companion.name, tuple(row), tuple(companion_row)),
            build=lambda: _pair_insert(table, tuple(row), companion, tuple(companion_row)),
        )
        if found is None:
            return None, False
        return found[0], bool(found[1])

    def insert_waiting_at_most(
        self, conn: Connection, table: Table, row: dict[str, Any], seconds: float
    ) -> Any:
        # The wait for the other inserter's transaction is a lock wait: lock_timeout bounds
        # it. In a savepoint, so that the timeout leaves the transaction usable.
        savepoint = conn.begin_nested()
        try:
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{max(1, int(seconds * 1000))}ms'")
            found = self.insert_unless_exists(conn, table, row)
            conn.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")
        except DBAPIError as error:
            savepoint.rollback()
            if getattr(error.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                raise LockWaitTimeout(table.name) from None
            raise
        savepoint.commit()
        return found

    def start_read_only(self, conn: Connection) -> None:
        # The first statement begins the transaction; SET TRANSACTION must be that statement.
        conn.exec_driver_sql("SET TRANSACTION READ ONLY")

    def start_reads(self, conn: Connection) -> None:
        # Postgres readers never take a lock a writer waits for.
        return None

    def comparable(self, expression: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        return expression

    def minute_of(self, expression: ColumnElement[Any]) -> ColumnElement[str]:
        utc = func.timezone("UTC", expression)
        return func.to_char(utc, 'YYYY-MM-DD"T"HH24:MI', type_=String)

    def after_create(self, conn: Connection) -> None:
        # Consumers use the writer's transaction id to find events committed out of id order.
        conn.execute(
            text(
                "ALTER TABLE asanoha_events ADD COLUMN IF NOT EXISTS tx_id xid8 "
                "NOT NULL DEFAULT pg_current_xact_id()"
            )
        )
        # A writer must own its transaction id before it takes an event id: a consumer that
        # finds an id missing below a committed one waits for every transaction that could
        # hold it, and knows them only by transaction id. Defaults are evaluated in column
        # order, so without this the id (column 1) would be drawn before tx_id assigns one.
        sequence = conn.execute(
            text("SELECT pg_get_serial_sequence('asanoha_events', 'id')")
        ).scalar_one()
        conn.execute(text(_NEXT_EVENT_ID.replace(":sequence", _quote_literal(sequence))))
        conn.execute(
            text("ALTER TABLE asanoha_events ALTER COLUMN id SET DEFAULT asanoha_next_event_id()")
        )


_NEXT_EVENT_ID = """
CREATE OR REPLACE FUNCTION asanoha_next_event_id() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval(:sequence::regclass);
END
$$
"""


def _quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class SqliteBackend:
    """SQLite (the embedded default): one writer at a time, taken at BEGIN; readers take no
    lock (WAL), so a slow read never delays a write."""

    name = "sqlite"

    def create_engine(self, url: URL, pool_size: int, pre_ping: bool = True) -> Engine:
        in_memory = url.database in (None, "", ":memory:")
        # For SQLite a pre-ping is a call into the library, not a round trip.
        options: dict[str, Any] = {"pool_pre_ping": pre_ping}
        if in_memory:
            # Every connection to :memory: opens a new, empty database: share one connection
            # so that the schema and the rows are the same for every caller.
            options["poolclass"] = StaticPool
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, **options
        )

        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy's BEGIN below be the only transaction control.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            if conn.get_execution_options().get(READS_ONLY):
                # A reader's snapshot needs no lock: writers go on while it reads.
                conn.exec_driver_sql("BEGIN DEFERRED")
            else:
                # A deferred transaction that reads and then writes cannot wait for the lock
                # (SQLITE_BUSY); taking the write lock at BEGIN serializes writers instead.
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    def insert_unless_exists(self, conn: Connection, table: Table, row: dict[str, Any]) -> Any:
        return _insert_unless_exists(conn, table, row, sqlite.insert)

    def insert_or_update(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        changes: dict[str, Any],
        where: ColumnElement[bool],
    ) -> None:
        _insert_or_update(conn, table, row, changes, where, sqlite.insert)

    def insert_pair_unless_exists(
        self,
        conn: Connection,
        table: Table,
        row: dict[str, Any],
        companion: Table,
        companion_row: dict[str, Any],
    ) -> tuple[Any, bool]:
        # SQLite has no data-modifying CTEs, and no round trips to save.
        made = self.insert_unless_exists(conn, companion, companion_row) is not None
        return self.insert_unless_exists(conn, table, row), made

    def after_create(self, conn: Connection) -> None:
        return None

    def insert_waiting_at_most(
        self, conn: Connection, table: Table, row: dict[str, Any], seconds: float
    ) -> Any:
        # Writers queue at BEGIN IMMEDIATE (bounded by busy_timeout): no inserter of the
        # same key can be running by now.
        return self.insert_unless_exists(conn, table, row)

    def start_read_only(self, conn: Connection) -> None:
        # SQLite has no read-only transactions; query handlers get no write verbs, and the
        # service refuses a write dispatched inside a query. It takes no write lock either.
        self.start_reads(conn)

    def start_reads(self, conn: Connection) -> None:
        conn.execution_options(**{READS_ONLY: True})

    def comparable(self, expression: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        # Decimals are stored as text (exact); as text, "10" sorts before "9".
        return cast(expression, Float) if kind == "decimal" else expression

    def minute_of(self, expression: ColumnElement[Any]) -> ColumnElement[str]:
        # Timestamps are stored as UTC text without a zone.
        return func.strftime("%Y-%m-%dT%H:%M", expression, type_=String)


def _insert_unless_exists(
    conn: Connection, table: Table, row: dict[str, Any], insert: Callable[[Table], Any]
) -> Any:
    """``row`` inserted with the dialect's ``ON CONFLICT DO NOTHING RETURNING`` key (compiled
    once per table): its key, or nothing when the key exists."""
    return execute_insert(
        conn,
        table,
        row,
        kind="unless_exists",
        build=lambda: insert(table).on_conflict_do_nothing().returning(*table.primary_key),
    )


def _insert_or_update(
    conn: Connection,
    table: Table,
    row: dict[str, Any],
    changes: dict[str, Any],
    where: ColumnElement[bool],
    insert: Callable[[Table], Any],
) -> None:
    """``row`` inserted with the dialect's ``ON CONFLICT (primary key) DO UPDATE ... WHERE``."""
    conn.execute(
        insert(table)
        .values(row)
        .on_conflict_do_update(index_elements=list(table.primary_key), set_=changes, where=where)
    )


def _companion_name(column: str) -> str:
    return f"companion_{column}"


def _pair_insert(
    table: Table, keys: tuple[str, ...], companion: Table, companion_keys: tuple[str, ...]
) -> Any:
    """``INSERT`` of ``table``'s ``keys`` with a CTE that inserts ``companion``'s, both
    ``ON CONFLICT DO NOTHING``; it returns the row's key, or no row when that exists, and how
    many companions were inserted (0 or 1)."""
    made = (
        postgresql.insert(companion)
        .values(
            {
                key: bindparam(_companion_name(key), type_=companion.c[key].type)
                for key in companion_keys
            }
        )
        .on_conflict_do_nothing()
        .returning(literal_column("1"))
        .cte("companion_made")
    )
    count = select(func.count()).select_from(made).scalar_subquery()
    return (
        postgresql.insert(table)
        .values({key: bindparam(key, type_=table.c[key].type) for key in keys})
        .on_conflict_do_nothing()
        .returning(*table.primary_key, count)
        .add_cte(made)
    )


def backend_for(url: URL) -> Backend:
    """The backend of a database URL."""
    if url.get_backend_name() == "postgresql":
        return PostgresBackend()
    if url.get_backend_name() == "sqlite":
        return SqliteBackend()
    raise ValueError(f"unsupported database {url.get_backend_name()!r}: use postgresql or sqlite")
