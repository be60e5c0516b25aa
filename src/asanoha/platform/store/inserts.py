"""The write path's INSERTs, compiled once per table and column set and sent on the driver's
cursor.

``Connection.execute`` of a Core insert looks the statement up in the compiled cache by its
cache key, builds an execution context, processes the parameters and sets up a result object,
on every call: for the two INSERTs of a create that is more CPU than the driver spends sending
them (see ``bench/profiles/README.md``). The statements here have a fixed shape (one table, a
fixed column set), so their SQL text, bind order and bind processors are worked out once and
kept with the table; each call only converts the row's values and executes.

Execution still goes through the ``Connection``: its statement events
(``before_cursor_execute``, which ``asanoha.testing.statements.capture_writes`` listens to),
its logging, and its translation of driver errors into SQLAlchemy's exceptions (with a lost
connection invalidated in the pool) apply as for any other statement.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Dialect, Insert, Table, insert

#: Where a table keeps its compiled inserts, in ``Table.info`` (the table's own user dict).
_CACHE_KEY = "asanoha.compiled_inserts"

BindProcessor = Callable[[Any], Any]


@dataclass(frozen=True)
class CompiledInsert:
    """An INSERT for one dialect and one column set: its SQL and how to bind a row."""

    sql: str
    #: The row keys in bind order, each with the type's bind processor (or ``None``).
    binds: tuple[tuple[str, str, BindProcessor | None], ...]
    #: Whether the driver takes a sequence of values (``?``) instead of a mapping.
    positional: bool

    def parameters(self, row: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        """The driver's parameters for ``row``."""
        if self.positional:
            return [
                value if process is None else process(value)
                for value, process in ((row[key], process) for _, key, process in self.binds)
            ]
        return {
            name: row[key] if process is None else process(row[key])
            for name, key, process in self.binds
        }


def compile_insert(
    statement: Insert, dialect: Dialect, keys: Sequence[str]
) -> CompiledInsert | None:
    """Compile ``statement`` for the columns ``keys``; ``None`` when it binds anything else
    (a column default computed in Python, a clause of its own): such a statement is left to
    ``Connection.execute``."""
    compiled: Any = statement.compile(dialect=dialect, column_keys=list(keys))
    names = list(compiled.positiontup) if compiled.positional else list(compiled.binds)
    bound = {compiled.binds[name].key for name in names}
    if bound != set(keys) or len(names) != len(keys):
        return None
    return _compiled(compiled, names, dialect)


def _compiled(compiled: Any, names: Sequence[str], dialect: Dialect) -> CompiledInsert:
    escaped = compiled.escaped_bind_names or {}
    binds = []
    for name in names:
        bind = compiled.binds[name]
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((escaped.get(name, name), bind.key, processor))
    return CompiledInsert(compiled.string, tuple(binds), bool(compiled.positional))


def execute_bound(
    conn: Connection,
    table: Table,
    row: Mapping[str, Any],
    *,
    kind: Hashable,
    build: Callable[[], Any],
) -> tuple[Any, ...] | None:
    """Run the statement ``build()`` makes, whose every value is a named ``bindparam`` that
    ``row`` gives (compiled once per ``kind`` and dialect, kept with ``table``); return the
    first row it returns (``None`` when none). Inside a transaction only."""
    cache: dict[tuple[Any, ...], CompiledInsert | None] = table.info.setdefault(_CACHE_KEY, {})
    cache_key = (kind, conn.dialect)
    compiled = cache.get(cache_key)
    if compiled is None:
        made: Any = build().compile(dialect=conn.dialect)
        names = list(made.positiontup) if made.positional else list(made.binds)
        compiled = cache[cache_key] = _compiled(made, names, conn.dialect)
    return _run(conn, compiled, row)


def _run(
    conn: Connection, compiled: CompiledInsert, row: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    return first_row(conn, compiled.sql, compiled.parameters(row))


def first_row(
    conn: Connection, sql: str, parameters: Sequence[Any] | Mapping[str, Any]
) -> tuple[Any, ...] | None:
    """Send ``sql`` (in the driver's parameter style) with ``parameters`` on the driver's
    cursor; return the first row it returns (``None`` when none). As for the compiled
    statements, through the ``Connection``: its statement events, logging and error
    translation apply, and no result object is set up. Inside a transaction only."""
    cursor = conn.connection.cursor()
    try:
        conn._cursor_execute(cursor, sql, parameters)
        found: tuple[Any, ...] | None = (
            cursor.fetchone() if cursor.description is not None else None
        )
        return found
    finally:
        cursor.close()


def execute_insert(
    conn: Connection,
    table: Table,
    row: Mapping[str, Any],
    *,
    kind: str = "insert",
    build: Callable[[], Insert] | None = None,
) -> Any:
    """Insert ``row`` into ``table``; return the first column of the first row the statement
    returns (``None`` when it returns none).

    ``build`` makes the statement (a plain ``insert(table)`` by default); ``kind`` names it
    among the table's compiled inserts (the same kind must always build the same statement).
    """
    make = build or (lambda: insert(table))
    if not conn.in_transaction():
        # Autobegin is Connection.execute's: without it the transaction would not be known
        # to the Connection, and its commit would not send COMMIT.
        return _execute_core(conn, make(), row)
    keys = tuple(row)
    cache: dict[tuple[Any, ...], CompiledInsert | None] = table.info.setdefault(_CACHE_KEY, {})
    cache_key = (kind, conn.dialect, keys)
    try:
        compiled = cache[cache_key]
    except KeyError:
        compiled = cache[cache_key] = compile_insert(make(), conn.dialect, keys)
    if compiled is None:
        return _execute_core(conn, make(), row)
    found = _run(conn, compiled, row)
    return None if found is None else found[0]


def _execute_core(conn: Connection, statement: Insert, row: Mapping[str, Any]) -> Any:
    result = conn.execute(statement, dict(row))
    return result.scalar_one_or_none() if result.returns_rows else None
