"""One throw-away database per test stack: a fresh Postgres database or a SQLite file."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from asanoha.platform.store.database import normalize_url

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DEFAULT_REPLICA_URL = "postgresql+psycopg://postgres@127.0.0.1:5433/postgres"
DatabaseKind = Literal["postgres", "postgresql", "sqlite"]


#: Letters, digits and underscores only: the prefix becomes part of an unquoted-safe name.
_PREFIX = re.compile(r"[a-z0-9_]{0,20}")


def database_prefix() -> str:
    """What every test database's name starts with: ``ASANOHA_TEST_DATABASE_PREFIX`` (empty
    by default), so suites sharing a server can tell, and clean up, their own databases."""
    prefix = os.environ.get("ASANOHA_TEST_DATABASE_PREFIX", "")
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"ASANOHA_TEST_DATABASE_PREFIX={prefix!r}: use at most 20 lower-case letters, "
            "digits and underscores"
        )
    return prefix


def admin_url() -> str:
    """The server to create test databases on: ``ASANOHA_TEST_DATABASE_URL`` or the local one."""
    return normalize_url(os.environ.get("ASANOHA_TEST_DATABASE_URL") or DEFAULT_ADMIN_URL)


def replica_server_url() -> str:
    """A hot standby of ``admin_url()``'s server, for stacks with a read replica:
    ``ASANOHA_TEST_REPLICA_URL`` or the local one (``scripts/replica.sh`` starts it)."""
    return normalize_url(os.environ.get("ASANOHA_TEST_REPLICA_URL") or DEFAULT_REPLICA_URL)


@dataclass
class TestDatabase:
    """A database that exists for one stack and is removed by ``drop()``."""

    __test__ = False

    kind: DatabaseKind
    name: str
    url: str
    admin_url: str | None = None
    directory: str | None = None

    @classmethod
    def create(cls, kind: DatabaseKind, name: str) -> TestDatabase:
        """Create the database ``name`` (Postgres) or a SQLite file in a fresh directory; the
        name starts with ``database_prefix()``."""
        name = f"{database_prefix()}{name}"
        if kind == "sqlite":
            directory = tempfile.mkdtemp(prefix=f"{name}-")
            url = f"sqlite+pysqlite:///{directory}/db.sqlite3"
            return cls(kind=kind, name=name, url=url, directory=directory)
        if kind not in ("postgres", "postgresql"):
            raise ValueError(f"database={kind!r}: use 'postgres' (or 'postgresql') or 'sqlite'")
        server = admin_url()
        engine = create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        return cls(kind=kind, name=name, url=url, admin_url=server)

    @property
    def replica_url(self) -> str:
        """The URL of this database on the hot standby of its server."""
        return (
            make_url(replica_server_url())
            .set(database=self.name)
            .render_as_string(hide_password=False)
        )

    def drop(self) -> None:
        """Remove the database, ending connections that are still open to it."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            return
        assert self.admin_url is not None
        engine = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": self.name},
                )
                conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        finally:
            engine.dispose()
