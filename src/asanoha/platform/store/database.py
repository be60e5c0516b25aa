"""``Database``: an engine plus the backend seam of its dialect."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from sqlalchemy import Connection, make_url

from asanoha.platform.store.backends import Backend, backend_for


def normalize_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class Database:
    """The database of an application."""

    def __init__(self, url: str, *, pool_size: int = 10, pre_ping: bool = True) -> None:
        self.url = make_url(normalize_url(url))
        self.backend: Backend = backend_for(self.url)
        self.engine = self.backend.create_engine(self.url, pool_size, pre_ping)

    @property
    def dialect(self) -> str:
        """``postgresql`` or ``sqlite``."""
        return self.backend.name

    def begin(self) -> AbstractContextManager[Connection]:
        """A connection in a transaction: committed on success, rolled back on error."""
        return self.engine.begin()

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads (a transaction begins on first use and is rolled back).

        Its transactions take no write lock: write through ``begin()``.
        """
        with self.engine.connect() as conn:
            self.backend.start_reads(conn)
            yield conn

    @contextmanager
    def read_only(self) -> Iterator[Connection]:
        """A connection in a read-only transaction (rolled back at the end): what queries get."""
        with self.engine.connect() as conn:
            self.backend.start_read_only(conn)
            yield conn

    def check(self) -> str:
        """``"ok"`` when the database answers ``SELECT 1``; raises what the driver raised."""
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        return "ok"

    def forget_inherited_connections(self, **_: object) -> None:
        """Start a forked child with an empty pool: the parent's pooled connections share
        their sockets with the parent, and two processes talking on one socket corrupt the
        protocol. Not closed (that would end the parent's sessions too), only dropped.
        Takes keyword arguments so it can be a signal receiver (Celery ``worker_process_init``).
        """
        self.engine.dispose(close=False)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
