"""Transaction locks on a job row's keys: what serialises the enqueues, claims and wakes of
one ``sequential`` key or one ``max_per_tenant`` slot across a fleet.

On Postgres a key's lock is an advisory transaction lock on a 64-bit id taken from the
key's digest (stored keys are 64 hex characters); SQLite serialises writers already. Keys
are locked in the order of their ids, so two holders of the same keys never deadlock.

The same lock has two forms: ``lock_keys`` takes the locks of keys the caller read, one
statement each; ``key_locks`` is one statement that takes the locks of the keys of a row,
for a transaction sent as a whole (``attempts_postgres``). Both compute the id the same way
(``lock_id`` in Python, ``_lock_id_sql`` in SQL); a test keeps them equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    Select,
    Table,
    bindparam,
    cast,
    func,
    literal,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects.postgresql import BIT

_LOCK = text("SELECT pg_advisory_xact_lock(:lock)")


def lock_id(key: str) -> int:
    """The advisory lock id of the stored key ``key``: its first 64 bits, signed."""
    value = int(key[:16], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def lock_keys(conn: Connection, keys: Iterable[str]) -> None:
    """Hold transaction locks on ``keys`` (stored keys) until ``conn``'s transaction ends,
    in a fixed order. On SQLite the write transaction holds the database's one write lock
    already."""
    if conn.dialect.name != "postgresql":
        return
    for lock in sorted({lock_id(key) for key in keys}):
        conn.execute(_LOCK, {"lock": lock})


def key_locks(outbox: Table, columns: Sequence[Column[str]]) -> Select[tuple[object]]:
    """Postgres: one statement that takes the locks of the row ``:row_id``'s keys in
    ``columns`` (those it holds), in the order ``lock_keys`` takes them."""
    row_id = bindparam("row_id", type_=outbox.c.id.type)
    held = [select(column.label("key")).where(outbox.c.id == row_id, column.is_not(None))
            for column in columns]  # fmt: skip
    keys = (union_all(*held) if len(held) > 1 else held[0]).subquery("row_keys")
    ordered = (
        select(_lock_id_sql(keys.c.key).label("lock"))
        .order_by(_lock_id_sql(keys.c.key))
        .subquery("row_locks")
    )
    return select(func.pg_advisory_xact_lock(ordered.c.lock))


def lock_id_of(key: str) -> Select[tuple[int]]:
    """Postgres: ``lock_id(key)`` as the database computes it (for the test that keeps the
    two forms equal)."""
    return select(_lock_id_sql(literal(key)))


def _lock_id_sql(key: ColumnElement[str]) -> ColumnElement[int]:
    # 'x' followed by 16 hex digits reads as a bit string, which reads as a signed bigint.
    bits = cast(literal("x") + func.substr(key, 1, 16), BIT(64))
    return cast(bits, BigInteger)
