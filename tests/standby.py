"""The local hot standby (``scripts/replica.sh``) is one server for every suite on the machine:
a test that pauses its replay or stops it changes what every other suite's replica reads see.
So a test that reads it holds ``standby_to_ourselves()`` for its whole run: a lock on the
primary (the standby's own server takes no locks that outlive a restart) that other suites'
replica tests wait for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.testing.databases import admin_url

#: The advisory lock id of the standby, on the primary's maintenance database.
STANDBY_LOCK = 0x6173616E6F686172  # "asanohar"


@contextmanager
def standby_to_ourselves() -> Iterator[None]:
    """Hold the standby's lock (waiting for another suite's replica test to end)."""
    engine = create_engine(admin_url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": STANDBY_LOCK})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": STANDBY_LOCK})
    finally:
        engine.dispose()
