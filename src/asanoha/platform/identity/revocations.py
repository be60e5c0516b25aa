"""Revoked tokens: rows of ``asanoha_token_revocations``, read by every API process.

A database table, not a Redis set: the database is the one service every API process
already needs (Redis is optional: the embedded default has none), a revocation must
survive restarts, and a row lives only until the token would have expired anyway, so the
table stays small. Each process reads the unexpired rows again once they are older than
``CACHE_SECONDS``: a revocation is seen everywhere within that time, the revoking process
at once, and checking a token costs no query.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Connection, Table, insert, select
from sqlalchemy.exc import IntegrityError

from asanoha.platform.store import Database

#: Seconds a process trusts its copy of the revocations: every process refuses a revoked
#: token within this time (well inside the 5 s the API promises).
CACHE_SECONDS = 2.0

log = logging.getLogger("asanoha.identity")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class RevocationList:
    """Which ``(tenant, jti)`` are revoked, cached for ``CACHE_SECONDS``."""

    def __init__(
        self,
        database: Database | None,
        table: Table,
        *,
        cache_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._table = table
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._revoked: frozenset[tuple[str, str]] = frozenset()
        self._read_at: float | None = None

    def is_revoked(self, tenant_id: str, jti: str) -> bool:
        """Whether the token ``jti`` of ``tenant_id`` is revoked (as of ``CACHE_SECONDS``
        ago at most)."""
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self._cache_seconds:
            with self._lock:
                if self._read_at is None or now - self._read_at >= self._cache_seconds:
                    self._reload(now)
        return (tenant_id, jti) in self._revoked

    def revoke(
        self,
        tenant_id: str,
        jti: str,
        *,
        expires_at: dt.datetime,
        revoked_by: str,
        conn: Connection | None = None,
    ) -> bool:
        """Revoke ``jti`` until ``expires_at`` (when the token expires anyway); ``False``
        when it already was. In ``conn``'s transaction when given, else in its own."""
        row = {
            "tenant_id": tenant_id,
            "jti": jti,
            "revoked_by": revoked_by,
            "revoked_at": _now(),
            "expires_at": max(expires_at, _now()),
        }
        try:
            if conn is not None:
                with conn.begin_nested():
                    conn.execute(insert(self._table).values(row))
            else:
                if self._database is None:
                    raise RuntimeError("these revocations are written through a connection")
                with self._database.begin() as own:
                    own.execute(insert(self._table).values(row))
        except IntegrityError:
            return False
        # This process sees its own revocation at once.
        with self._lock:
            self._revoked = self._revoked | {(tenant_id, jti)}
        return True

    def _reload(self, now: float) -> None:
        table = self._table
        if self._database is None:
            raise RuntimeError("these revocations are read through an application's database")
        try:
            with self._database.connect() as conn:
                rows = conn.execute(
                    select(table.c.tenant_id, table.c.jti).where(table.c.expires_at > _now())
                ).all()
        except Exception as exc:
            log.warning("token revocations not re-read (last copy kept): %s", exc)
            self._read_at = now
            return
        self._revoked = frozenset((row.tenant_id, row.jti) for row in rows)
        self._read_at = now
