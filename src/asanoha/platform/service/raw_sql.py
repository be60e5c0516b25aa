"""``ctx.sql``: SQL on a handler's own tables, in the handler's transaction.

The escape hatch for what the entity executor does not serve (a cache table, a report over
the handler's own rows). A handler declares ``raw_sql="<reason>"`` to get it. Entity rows and
the platform's tables (``asanoha_*``) stay out of its reach, reads included: a write there
would skip the event, the provenance of instruction fields and the gates, and a read would
skip the tenant scope and the trust labels that ``ctx.entity(...)`` applies.

Every statement is inspected as it reaches the driver (a ``before_cursor_execute`` listener
on the connection, for the length of the call), so Core statements, ``text()`` and plain
strings are judged by the SQL the database would run. The inspection errs towards refusing:

- a protected table's name anywhere in the text (string literals and comments included:
  pass values as bound parameters) refuses the statement;
- only one statement per call, of a known kind (``SELECT``/``WITH``/``VALUES``/``TABLE``,
  ``INSERT``/``UPDATE``/``DELETE``/``REPLACE``, and ``CREATE``/``ALTER``/``DROP`` of a table or
  an index, ``TRUNCATE``); what changes the session or the transaction, or runs SQL built at
  run time (``DO``, ``CREATE FUNCTION``/``TRIGGER``, ``COMMIT``, ``SET``, ``PRAGMA``, ...),
  is refused, as are the functions that run a query given as text, take a table's name as
  a value or reach outside the transaction (``query_to_xml``, ``setval``, advisory locks);
- in a query handler only reads pass.

Results come back buffered (``SqlResult``), so nothing handed out leads back to the connection.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Executable, Row, RowMapping, event, text

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.store import Tables

#: Every platform table starts with it, today's and tomorrow's.
PLATFORM_PREFIX = "asanoha_"
#: Tables outside the registry's metadata that the schema path owns.
SCHEMA_TABLES = frozenset({"alembic_version"})

# One lexical token of SQL, so that ";" and keywords inside literals, comments and quoted
# identifiers are not taken for code. E'...' strings (Postgres) know backslash escapes.
_TOKEN = re.compile(
    r"""
      (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<unicode>[Uu]&['"])
    | (?P<escaped>[Ee]'(?:[^'\\]|\\.|'')*(?:'|\Z))
    | (?P<string>[XxBbNn]?'(?:[^']|'')*(?:'|\Z))
    | (?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z0-9_]*)?\$.*?(?:\$(?P=tag)\$|\Z))
    | (?P<quoted>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<end>;)
    | (?P<other>\S)
    """,
    re.DOTALL | re.VERBOSE,
)
# Any name-like run of characters, wherever it stands: a protected table named in a string
# literal or a comment counts too (``'prompts'::regclass``, a function body).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")

_READS = frozenset({"select", "with", "values", "table"})
_WRITES = frozenset({"insert", "update", "delete", "replace", "truncate"})
_SCHEMA = frozenset({"create", "alter", "drop"})
# What may stand between CREATE and TABLE/INDEX.
_CREATE_MODIFIERS = frozenset({"temp", "temporary", "unlogged", "global", "local", "unique"})
_SCHEMA_OBJECTS = frozenset({"table", "index"})
# Words that make a statement write, refused in a query handler (FOR UPDATE included).
# ("replace" is also a string function; REPLACE INTO is caught by "into".)
_WRITING_WORDS = (_WRITES - {"replace"}) | _SCHEMA | frozenset({"merge", "into"})
# Functions that run a query given as text, reach outside the transaction (other sessions,
# files, locks the platform's passes may take), or take an object's name as a value, which a
# name built at run time ((chr(97) || 'sanoha_...')::regclass) would slip past the name check.
_REFUSED_FUNCTIONS = re.compile(
    r"^(?:(?:query|cursor|table|schema|database)_to_xml\w*|dblink\w*|set_config"
    r"|lo_import|lo_export|pg_read_\w*|load_extension|setval|nextval"
    r"|pg_(?:try_)?advisory\w*|pg_terminate_backend|pg_cancel_backend)$"
)


class RawSqlRefused(AccessDeniedError):
    """``ctx.sql`` refused a statement: ``details.refused`` says why."""

    def __init__(self, handler: str, refused: str) -> None:
        super().__init__(Reasons.RAW_SQL_REFUSED, handler=handler, refused=refused)


@dataclass(frozen=True)
class SqlResult:
    """The buffered outcome of one ``ctx.sql.execute``: the rows (if the statement returns
    any) and the number of rows it matched."""

    rows: tuple[Row[Any], ...]
    rowcount: int

    def __iter__(self) -> Iterator[Row[Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def all(self) -> list[Row[Any]]:
        """Every row."""
        return list(self.rows)

    def first(self) -> Row[Any] | None:
        """The first row, or ``None``."""
        return self.rows[0] if self.rows else None

    def one(self) -> Row[Any]:
        """The only row; raises ``ValueError`` unless there is exactly one."""
        if len(self.rows) != 1:
            raise ValueError(f"expected exactly one row, got {len(self.rows)}")
        return self.rows[0]

    def scalar(self) -> Any:
        """The first column of the first row, or ``None`` without rows."""
        return self.rows[0][0] if self.rows else None

    def scalar_one(self) -> Any:
        """The first column of the only row."""
        return self.one()[0]

    def scalars(self) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in self.rows]

    def mappings(self) -> list[RowMapping]:
        """Every row as a mapping of column name to value."""
        return [row._mapping for row in self.rows]


class RawSql:
    """``ctx.sql`` of a handler that declared ``raw_sql``: statements on its own tables, in
    its transaction (they commit with the write, or roll back with it)."""

    def __init__(
        self, conn: Connection, *, owner: str, protected: frozenset[str], read_only: bool
    ) -> None:
        self._conn = conn
        self._owner = owner
        self._protected = protected
        self._read_only = read_only

    @property
    def dialect(self) -> str:
        """The database's dialect name (``postgresql``, ``sqlite``)."""
        return self._conn.dialect.name

    def execute(
        self,
        statement: str | Executable,
        parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> SqlResult:
        """Run one statement (a string is taken as ``text()``, with ``:name`` parameters)."""
        executable = text(statement) if isinstance(statement, str) else statement
        with self._inspected():
            result = self._conn.execute(executable, parameters)
            rows = tuple(result.all()) if result.returns_rows else ()
            return SqlResult(rows, result.rowcount)

    @contextmanager
    def _inspected(self) -> Iterator[None]:
        # The listener judges what reaches the driver, and only while this call runs: the
        # platform's own statements on the same connection are not the handler's.
        def inspect(
            conn: Connection, cursor: Any, sql: str, parameters: Any, context: Any, many: bool
        ) -> None:
            if not conn.in_transaction():
                # The platform's BEGIN (SQLite), sent from the "begin" event of the
                # transaction this statement starts, before the transaction counts as begun.
                # Were that ever to change, the BEGIN would be refused: loud, not lax.
                return
            refused = refusal(sql, self._protected, read_only=self._read_only)
            if refused is not None:
                raise RawSqlRefused(self._owner, refused)

        event.listen(self._conn, "before_cursor_execute", inspect)
        try:
            yield
        finally:
            event.remove(self._conn, "before_cursor_execute", inspect)


def protected_tables(names: Iterable[str]) -> frozenset[str]:
    """The names ``ctx.sql`` refuses: ``names`` (the entity and platform tables of the
    registry) and the schema path's own, lower-cased."""
    return frozenset(name.lower() for name in names) | SCHEMA_TABLES


def refusal(sql: str, protected: frozenset[str], *, read_only: bool) -> str | None:
    """Why ``sql`` may not run through ``ctx.sql``, or ``None`` when it may."""
    for match in _NAME.finditer(sql):
        name = match.group().lower()
        if name in protected or name.startswith(PLATFORM_PREFIX):
            return f"it names {name!r}, a table of an entity or of the platform"
    words: list[str] = []
    ended = False
    for token in _TOKEN.finditer(sql):
        kind = token.lastgroup
        if kind == "comment":
            continue
        if ended:
            return "one statement per call"
        if kind == "unicode":
            return "Unicode-escaped names and strings (U&) are not inspected"
        if kind == "end":
            ended = True
        elif kind == "word":
            words.append(token.group().lower())
    if not words:
        return "no statement"
    for word in words:
        if _REFUSED_FUNCTIONS.match(word):
            return (
                f"{word}() is refused: it runs SQL given as text, takes a table's name as a "
                "value or reaches outside the transaction"
            )
    first = words[0]
    if read_only:
        if first not in _READS or _WRITING_WORDS.intersection(words):
            return "a query handler's SQL may only read"
        return None
    if first in _READS or first in _WRITES:
        return None
    if first in _SCHEMA:
        rest = [word for word in words[1:] if word not in _CREATE_MODIFIERS]
        if rest and rest[0] in _SCHEMA_OBJECTS:
            return None
    return (
        f"{first.upper()} statements are not allowed: only reads, INSERT/UPDATE/DELETE and "
        "CREATE/ALTER/DROP of a table or an index"
    )


def open_raw_sql(
    conn: Connection, tables: Tables, owner: str, reason: str | None, *, read_only: bool
) -> RawSql:
    """``ctx.sql`` for ``owner`` (a handler or consumer QN) that declared ``raw_sql=reason``;
    403 ``raw_sql_not_declared`` when it declared nothing."""
    if reason is None:
        raise AccessDeniedError(Reasons.RAW_SQL_NOT_DECLARED, handler=owner)
    protected = protected_tables(tables.metadata.tables)
    return RawSql(conn, owner=owner, protected=protected, read_only=read_only)
