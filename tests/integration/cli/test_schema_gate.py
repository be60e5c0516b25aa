"""Every command that starts the application checks the schema the same way: it brings it up
to date on SQLite, and on Postgres refuses to start with the command to run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, select
from sqlalchemy.pool import NullPool

from asanoha.platform.store import platform_tables
from asanoha.platform.store.database import normalize_url
from asanoha.platform.store.migrations import PLATFORM_VERSION_TABLE, database_revision
from asanoha.platform.store.migrations.revisions import platform_head
from asanoha.platform.store.migrations.runner import PLATFORM_FOLDER, make_config, platform_target
from asanoha.testing.databases import TestDatabase
from tests.integration.cli.conftest import Project, asanoha_script
from tests.integration.cli.test_migrate import table_names
from tests.integration.cli.test_worker_metrics import free_port

CONSUMING_SHOP = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.consumer("count", on=["shop:event:note.created"])
def count(event, ctx):
    pass


app = App([feature])
"""
#: A platform revision from before the consumers' ``types`` column (0005).
OLDER_PLATFORM_REVISION = "0004"


@pytest.fixture
def older_sqlite_project(tmp_path: Path) -> Iterator[Project]:
    """An application with a consumer, on a SQLite database at an older platform revision."""
    database = TestDatabase.create("sqlite", f"asanoha_old_{uuid.uuid4().hex[:12]}")
    engine = create_engine(normalize_url(database.url), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            config = make_config(PLATFORM_FOLDER, platform_target(), connection=conn)
            command.upgrade(config, OLDER_PLATFORM_REVISION)
    finally:
        engine.dispose()
    project = Project(tmp_path, database)
    (tmp_path / "shop.py").write_text(CONSUMING_SHOP, encoding="utf-8")
    try:
        yield project
    finally:
        database.drop()


def test_worker_on_an_older_sqlite_database_upgrades_it_before_writing_cursor_rows(
    older_sqlite_project: Project,
) -> None:
    started = older_sqlite_project.run("worker", "--app", "shop:app")
    # The schema step passed; the worker then refuses the in-process broker, as it should.
    assert "Traceback" not in started.stderr, started.stderr
    assert "asanoha worker needs a broker other processes reach" in started.stderr
    engine = create_engine(normalize_url(older_sqlite_project.database.url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            assert database_revision(conn, PLATFORM_VERSION_TABLE) == platform_head()
            consumers = platform_tables().consumers
            rows = conn.execute(select(consumers.c.name, consumers.c.types)).all()
    finally:
        engine.dispose()
    assert ("shop:consumer:count", ["shop:event:note.created"]) in [tuple(row) for row in rows]


def test_mcp_refuses_a_postgres_database_that_is_behind_and_changes_nothing(
    project: Project,
) -> None:
    refused = project.run(
        "mcp", "--app", "shop:app", "--transport", "http", "--port", str(free_port())
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "the database schema is behind the code (" in refused.stderr
    assert "entity table shop_notes does not exist" in refused.stderr
    assert "Run 'asanoha migrate --app shop:app' first." in refused.stderr
    assert table_names(project) == set()


def test_beat_refuses_a_postgres_database_that_is_behind_and_changes_nothing(
    project: Project,
) -> None:
    refused = project.run("beat", "--app", "shop:app")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "the database schema is behind the code (" in refused.stderr
    assert "Run 'asanoha migrate --app shop:app' first." in refused.stderr
    assert table_names(project) == set()


def test_a_migrated_postgres_database_is_checked_without_loading_alembic(
    project: Project,
) -> None:
    project.write_shop(with_colour=True)
    assert project.run("migrate", "revision", "--app", "shop:app", "-m", "initial").returncode == 0
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    script = (
        "import json, sys\n"
        "from shop import app\n"
        "from asanoha.cli.schema_gate import require_current_schema\n"
        "upgrade = require_current_schema(app, 'shop:app')\n"
        "assert upgrade.status.app_head is not None and upgrade.checked_only\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    checked = subprocess.run(
        [sys.executable, "-c", script],
        cwd=project.folder,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    loaded = set(json.loads(checked.stdout.splitlines()[-1]))
    assert not {name for name in loaded if name.split(".")[0] in ("alembic", "mako")}


def serve_until_healthy(project: Project) -> None:
    """Start ``asanoha serve``, wait until ``/health`` answers, stop it."""
    port = free_port()
    server = subprocess.Popen(
        [asanoha_script(), "serve", "--app", "shop:app", "--port", str(port)],
        cwd=project.folder,
        env=project.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    try:
        while server.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)  # not up yet: poll again
        assert server.poll() is None, server.communicate()[1]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def test_serve_on_sqlite_runs_the_projects_migrations(tmp_path: Path) -> None:
    database = TestDatabase.create("sqlite", f"asanoha_gate_{uuid.uuid4().hex[:12]}")
    project = Project(tmp_path, database)
    project.write_shop(with_colour=True)
    try:
        written = project.run("migrate", "revision", "--app", "shop:app", "-m", "initial")
        assert written.returncode == 0, written.stderr
        engine = create_engine(normalize_url(database.url), poolclass=NullPool)
        try:
            # The revision was generated against the empty database; nothing ran yet.
            with engine.connect() as conn:
                assert "shop_notes" not in inspect(conn).get_table_names()
        finally:
            engine.dispose()
        serve_until_healthy(project)
        check = project.run("migrate", "check", "--app", "shop:app")
        assert check.returncode == 0, check.stdout
    finally:
        database.drop()
