"""Reads from a streaming hot standby: which database serves a query, and read-your-writes.

A query handler declared ``replica=True`` may read from ``ASANOHA_READ_DATABASE_URL``. The
standby serves it only when it answers, lags at most ``max_lag`` seconds, and has replayed the
caller's last write: a write's caller gets its commit position (an LSN, see
``commit_position``) and hands it back with its next read. Anything else reads the primary,
so a replica never makes a read older than the caller's own writes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Connection, make_url, text
from sqlalchemy.exc import DBAPIError

from asanoha.platform.store.database import Database, normalize_url

log = logging.getLogger("asanoha.replica")

#: An LSN as Postgres prints it: two hexadecimal numbers of up to 32 bits.
LSN_PATTERN = re.compile(r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")
#: Seconds a standby that did not answer is left alone before it is tried again: a query
#: should not wait for a connect timeout each time.
RETRY_AFTER_SECONDS = 5.0
#: Seconds to wait for the standby to accept a connection.
CONNECT_TIMEOUT_SECONDS = 2

#: Why a query that could read the standby read the primary.
Bypass = Literal["unavailable", "lagging", "behind_caller", "not_standby"]

#: Whether the standby has replayed the position ``:after``.
_REPLAYED = "pg_last_wal_replay_lsn() >= CAST(:after AS pg_lsn)"
# One statement: whether the standby has replayed the caller's write, and how far it lags.
# It is caught up when it replayed all it received from a WAL receiver that streams; else
# its lag is the age of the last transaction it replayed (a standby cut off from its primary
# thus ages until it is bypassed).
_STANDBY_STATE = text(
    f"""
    SELECT pg_is_in_recovery() AS standby,
           CASE WHEN CAST(:after AS pg_lsn) IS NULL THEN true ELSE {_REPLAYED} END AS has_write,
           CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
                     AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')
                THEN 0.0
                ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())
           END AS lag
    """
)
_HAS_REPLAYED = text(f"SELECT {_REPLAYED}")
#: The primary's position past every commit so far (``ReadReplica.commit_position``).
_COMMIT_POSITION = (
    "SELECT CASE WHEN current_setting('synchronous_commit') = 'off'"
    " THEN pg_current_wal_insert_lsn() ELSE pg_current_wal_flush_lsn() END"
)


#: The highest LSN, which no standby replays: the position handed to a writer when its
#: write's position could not be read, so that its reads go to the primary (the cookie
#: carrying it lives as long as the replica may lag, as a real position's does).
PRIMARY_ONLY = "FFFFFFFF/FFFFFFFF"


def valid_position(position: str) -> bool:
    """Whether ``position`` is an LSN (``16/B374D848``)."""
    return bool(LSN_PATTERN.match(position))


@dataclass(frozen=True)
class ReadAfter:
    """A caller that may read the standby, and the position of its last write (``None``:
    it made none lately)."""

    position: str | None = None


class ReadReplica:
    """The standby of one application, and the rule that decides when it may serve."""

    def __init__(
        self, url: str, *, primary: Database, pool_size: int, pre_ping: bool, max_lag: float
    ) -> None:
        target = _with_connect_timeout(url)
        self.database = Database(target, pool_size=pool_size, pre_ping=pre_ping)
        if self.database.dialect != "postgresql" or primary.dialect != "postgresql":
            raise ValueError(
                "ASANOHA_READ_DATABASE_URL needs PostgreSQL for both the primary "
                "(ASANOHA_DATABASE_URL) and the standby: replica reads follow the primary's "
                "write-ahead log"
            )
        self.primary = primary
        self.max_lag = max_lag
        self._lock = threading.Lock()
        self._down_until = 0.0

    def commit_position(self) -> str:
        """A WAL position at or past every commit made before on the primary.

        Read after the commit, never inside the write's transaction: a transaction becomes
        visible on the standby when its commit record is replayed, and that record is
        written by COMMIT itself, so a position read before it (on any connection) lies
        before the record. Once a synchronous COMMIT has returned, its record is flushed:
        the flush position of any connection is past it, and a pooled connection serves as
        well as the write's own. The flush position, not the insert position: WAL inserted
        but not flushed yet (another session's records) reaches the standby only with the
        next flush, which on a quiet primary can be seconds away, and the writer would read
        the primary that long. Where commits are asynchronous (``synchronous_commit=off``)
        the record may not be flushed yet, so the insert position is the one that holds.
        """
        with self.primary.engine.connect() as conn:
            return str(conn.exec_driver_sql(_COMMIT_POSITION).scalar_one())

    def has_replayed(self, position: str) -> bool:
        """Whether the standby has replayed ``position`` (a ``commit_position``); raises the
        driver's error when it does not answer."""
        with self.database.engine.connect() as conn:
            return bool(conn.execute(_HAS_REPLAYED, {"after": position}).scalar_one())

    @contextmanager
    def read_only(self, after: ReadAfter) -> Iterator[tuple[Connection, Bypass | None]]:
        """A read-only connection on the standby when it may serve ``after``, else on the
        primary with the reason it was bypassed (``None``: the standby serves)."""
        conn, bypass = self._standby_for(after)
        if conn is None:
            with self.primary.read_only() as primary_conn:
                yield primary_conn, bypass
            return
        try:
            yield conn, None
        finally:
            conn.close()

    def _standby_for(self, after: ReadAfter) -> tuple[Connection | None, Bypass | None]:
        if time.monotonic() < self._down_until:
            return None, "unavailable"
        try:
            conn = self.database.engine.connect()
        except DBAPIError as error:
            self._mark_down(error)
            return None, "unavailable"
        try:
            self.database.backend.start_read_only(conn)
            state = conn.execute(_STANDBY_STATE, {"after": after.position}).one()
        except DBAPIError as error:
            conn.close()
            self._mark_down(error)
            return None, "unavailable"
        bypass = _bypass_reason(state.standby, state.has_write, state.lag, self.max_lag)
        if bypass is None:
            return conn, None
        conn.close()
        return None, bypass

    def _mark_down(self, error: DBAPIError) -> None:
        with self._lock:
            first = time.monotonic() >= self._down_until
            self._down_until = time.monotonic() + RETRY_AFTER_SECONDS
        if first:
            log.warning(
                "the read replica does not answer (%s); queries read the primary for %.0f s",
                type(error.orig or error).__name__,
                RETRY_AFTER_SECONDS,
            )

    def dispose(self) -> None:
        """Close the standby's pooled connections."""
        self.database.dispose()

    def forget_inherited_connections(self, **_: object) -> None:
        """Start a forked child with an empty standby pool (see ``Database``)."""
        self.database.forget_inherited_connections()


def _bypass_reason(
    standby: bool, has_write: bool | None, lag: float | None, max_lag: float
) -> Bypass | None:
    if not standby:
        # A promoted or mistaken server is no longer the primary's copy.
        return "not_standby"
    if not has_write:
        return "behind_caller"
    if lag is None or float(lag) > max_lag:
        return "lagging"
    return None


def _with_connect_timeout(url: str) -> str:
    """``url`` with a connect timeout, unless it sets one."""
    parsed = make_url(normalize_url(url))
    if "connect_timeout" in parsed.query:
        return parsed.render_as_string(hide_password=False)
    timed = parsed.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_SECONDS)})
    return timed.render_as_string(hide_password=False)
