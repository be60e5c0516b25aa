"""Database failures that are not the caller's fault, as errors a client can act on.

The one place that reads SQLSTATE (Postgres) and result codes (SQLite): a database that
cannot serve now is 503 ``service_unavailable``, a transaction that lost to a concurrent one
(deadlock, serialization failure, lock not available) is 409 ``transaction_conflict``; both
say ``retryable``. Anything else stays an internal error. A statement on a table that does not
exist (``is_missing_table``) is a database nobody migrated.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import exc

from asanoha.platform.errors.exceptions import (
    AsanohaError,
    ConflictError,
    ServiceUnavailableError,
)
from asanoha.platform.errors.reasons import Reasons

#: SQLSTATEs of a transaction that another one made fail: running it again may succeed.
CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
#: SQLSTATE classes of a server that cannot serve: connection exception, insufficient
#: resources, operator intervention (shutdown, cancelled statement).
UNAVAILABLE_SQLSTATE_CLASSES = frozenset({"08", "53", "57"})
#: SQLite primary result codes of a database another process holds or that cannot be
#: reached: BUSY, LOCKED, IOERR, FULL, CANTOPEN.
UNAVAILABLE_SQLITE_CODES = frozenset({5, 6, 10, 13, 14})
#: SQLSTATE of a statement on a table that does not exist (undefined_table).
UNDEFINED_TABLE_SQLSTATE = "42P01"
#: SQLite has no code of its own for it: a plain SQLITE_ERROR with this text.
SQLITE_NO_SUCH_TABLE = "no such table"


def database_failure(error: BaseException) -> AsanohaError | None:
    """The client-facing error for a database failure, or ``None`` when it is a bug."""
    if isinstance(error, exc.TimeoutError):
        # No pooled connection became free in time.
        return unavailable(None)
    if not isinstance(error, exc.DBAPIError):
        return None
    original = error.orig
    if isinstance(original, sqlite3.Error):
        code = getattr(original, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in UNAVAILABLE_SQLITE_CODES:
            return unavailable(getattr(original, "sqlite_errorname", None))
        return None
    sqlstate = getattr(original, "sqlstate", None)
    if isinstance(sqlstate, str):
        if sqlstate in CONFLICT_SQLSTATES:
            return ConflictError(Reasons.TRANSACTION_CONFLICT, sqlstate=sqlstate, retryable=True)
        if sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES:
            return unavailable(sqlstate)
        return None
    if error.connection_invalidated or isinstance(error, exc.OperationalError | exc.InterfaceError):
        # The driver raised before the server answered: refused, lost or closed connection.
        return unavailable(None)
    return None


def unavailable(code: str | None) -> ServiceUnavailableError:
    """503 ``service_unavailable`` for the database, worth retrying."""
    details: dict[str, object] = {"dependency": "database", "retryable": True}
    if code:
        details["code"] = code
    return ServiceUnavailableError(Reasons.SERVICE_UNAVAILABLE, **details)


def is_missing_table(error: BaseException) -> bool:
    """Whether ``error`` is a statement on a table the database does not have."""
    if not isinstance(error, exc.DBAPIError):
        return False
    original = error.orig
    if isinstance(original, sqlite3.Error):
        return str(original).startswith(SQLITE_NO_SUCH_TABLE)
    return getattr(original, "sqlstate", None) == UNDEFINED_TABLE_SQLSTATE
