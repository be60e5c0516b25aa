"""One throw-away database per test stack: a fresh Postgres database or a SQLite file."""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Connection, create_engine, make_url, text
from sqlalchemy.pool import NullPool

from asanoha.platform.model import Registry
from asanoha.platform.schema import bring_schema_up_to_date
from asanoha.platform.store.database import Database, normalize_url

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
    def create(
        cls, kind: DatabaseKind, name: str, *, with_platform_tables: bool = False
    ) -> TestDatabase:
        """Create the database ``name`` (Postgres) or a SQLite file in a fresh directory; the
        name starts with ``database_prefix()``.

        ``with_platform_tables``: the database starts as a copy of a template (the run's
        template database, see ``platform_template``; for SQLite a file this process made
        once) holding the platform's tables at the newest revision, so that
        ``create_schema`` only adds the entity tables and cursor rows. Empty otherwise.
        """
        prefix = database_prefix()
        name = f"{prefix}{name}"
        if kind == "sqlite":
            directory = tempfile.mkdtemp(prefix=f"{name}-")
            path = os.path.join(directory, SQLITE_FILE)
            if with_platform_tables:
                shutil.copyfile(sqlite_platform_template(), path)
            return cls(kind=kind, name=name, url=_sqlite_url(path), directory=directory)
        if kind not in ("postgres", "postgresql"):
            raise ValueError(f"database={kind!r}: use 'postgres' (or 'postgresql') or 'sqlite'")
        server = admin_url()
        template = platform_template(server, prefix) if with_platform_tables else None
        engine = create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                copied = f' TEMPLATE "{template}"' if template is not None else ""
                conn.execute(text(f'CREATE DATABASE "{name}"{copied}'))
        finally:
            engine.dispose()
        return cls(kind=kind, name=name, url=_database_url(server, name), admin_url=server)

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


SQLITE_FILE = "db.sqlite3"


def _database_url(server: str, name: str) -> str:
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def _sqlite_url(path: str) -> str:
    return f"sqlite+pysqlite:///{path}"


# -- the template of a run ------------------------------------------------------------------

#: Names the test run (shared by its pytest-xdist workers, which inherit it) in the names of
#: its template databases, so that a run removes its own and never another suite's.
TEMPLATE_RUN_VARIABLE = "ASANOHA_TEST_TEMPLATE_RUN"
_TEMPLATE_MARK = "asanoha_tpl_"
_templates_lock = threading.Lock()
#: (server, template) pairs this process knows to exist.
_ready_templates: set[tuple[str, str]] = set()


def template_run() -> str:
    """The id of this test run in its template databases' names (made on first use)."""
    return os.environ.get(TEMPLATE_RUN_VARIABLE) or start_template_run()


def start_template_run() -> str:
    """Name a new test run, for this process and those it starts (its pytest-xdist
    workers). A test session calls it even when it inherited a name: a pytest run started
    by a test has templates of its own and drops them at its end, never its parent's."""
    run = secrets.token_hex(6)
    os.environ[TEMPLATE_RUN_VARIABLE] = run
    return run


def platform_template(server: str, prefix: str) -> str:
    """The name of the run's template database on ``server``: the platform's tables at the
    newest revision, made once per run by ``bring_schema_up_to_date`` on an empty registry.

    Making the platform's tables is most of a fresh stack's setup on Postgres; copying a
    database is a fraction of it. The platform's tables are the same for every application
    (``platform_tables()``), so one template serves every stack of the run. It is built
    under another name and renamed when complete, under an advisory lock, so that a
    concurrent worker of the same run waits for it and never copies half of it.
    """
    name = f"{prefix}{_TEMPLATE_MARK}{template_run()}"
    with _templates_lock:
        if (server, name) in _ready_templates:
            return name
        engine = create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(hashtext(:name))"), {"name": name})
                try:
                    if not _database_exists(conn, name):
                        _build_template(conn, server, name)
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(hashtext(:name))"), {"name": name})
        finally:
            engine.dispose()
        _ready_templates.add((server, name))
        return name


_sqlite_template: str | None = None


def sqlite_platform_template() -> str:
    """The path of this process's SQLite template: a file holding the platform's tables at
    the newest revision, made on first use and removed when the process exits."""
    global _sqlite_template
    with _templates_lock:
        if _sqlite_template is None:
            directory = tempfile.mkdtemp(prefix="asanoha-tpl-")
            atexit.register(shutil.rmtree, directory, True)
            path = os.path.join(directory, SQLITE_FILE)
            _make_platform_tables(_sqlite_url(path))
            _sqlite_template = path
        return _sqlite_template


def _make_platform_tables(url: str) -> None:
    database = Database(url, pool_size=1)
    try:
        bring_schema_up_to_date(Registry([]), database, migrations=None, may_change=True)
    finally:
        # A database being copied or renamed may have no connection open (nor, for SQLite,
        # a write-ahead log left beside the file).
        database.engine.dispose()


def _build_template(conn: Connection, server: str, name: str) -> None:
    building = f"{name}_building"
    conn.execute(text(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)'))
    conn.execute(text(f'CREATE DATABASE "{building}"'))
    _make_platform_tables(_database_url(server, building))
    conn.execute(text(f'ALTER DATABASE "{building}" RENAME TO "{name}"'))


def _database_exists(conn: Connection, name: str) -> bool:
    found = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name})
    return found.scalar() is not None


def drop_templates(servers: Iterable[str]) -> None:
    """Drop the template databases of this run (``template_run()``) on ``servers``."""
    run = os.environ.get(TEMPLATE_RUN_VARIABLE)
    if not run:
        return
    for server in servers:
        engine = create_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                names = conn.execute(
                    text("SELECT datname FROM pg_database WHERE strpos(datname, :mark) > 0"),
                    {"mark": f"{_TEMPLATE_MARK}{run}"},
                ).scalars()
                for name in list(names):
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            engine.dispose()
        with _templates_lock:
            _ready_templates.difference_update(
                {key for key in _ready_templates if key[0] == server}
            )


def template_servers() -> set[str]:
    """The servers on which this process made or used a template database."""
    with _templates_lock:
        return {server for server, _ in _ready_templates}
