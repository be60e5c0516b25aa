"""``asanoha migrate``: upgrade, SQL, check, revisions for entity tables; serve refuses a
database that is behind."""

from __future__ import annotations

import re

from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from asanoha.platform.store.database import normalize_url
from asanoha.platform.store.migrations import PLATFORM_VERSION_TABLE, platform_head
from asanoha.platform.store.migrations.runner import platform_metadata
from tests.integration.cli.conftest import Project

#: Every table the platform declares, and the version table of its migrations.
PLATFORM_TABLES = {*platform_metadata().tables, PLATFORM_VERSION_TABLE}


def table_names(project: Project) -> set[str]:
    engine = create_engine(normalize_url(project.database.url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_migrate_on_an_empty_database_creates_the_tables_and_a_second_run_is_a_no_op(
    project: Project,
) -> None:
    first = project.run("migrate", "--app", "shop:app")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"platform tables: upgraded from an empty database to {platform_head()}" in first.stdout
    assert table_names(project) == PLATFORM_TABLES | {"shop_notes"}

    second = project.run("migrate", "--app", "shop:app")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"platform tables: already at revision {platform_head()}" in second.stdout
    assert table_names(project) == PLATFORM_TABLES | {"shop_notes"}


def test_migrate_sql_prints_the_statements_and_changes_nothing(project: Project) -> None:
    done = project.run("migrate", "--app", "shop:app", "--sql")
    assert done.returncode == 0, done.stderr
    assert "CREATE TABLE asanoha_events" in done.stdout
    assert "ADD COLUMN tx_id xid8" in done.stdout
    # The head is recorded by the first revision's INSERT or a later revision's UPDATE.
    assert (
        f"INSERT INTO asanoha_alembic_version (version_num) VALUES ('{platform_head()}')"
        in done.stdout
        or f"UPDATE asanoha_alembic_version SET version_num='{platform_head()}'" in done.stdout
    )
    assert table_names(project) == set()


def test_migrate_check_fails_while_the_database_is_behind(project: Project) -> None:
    behind = project.run("migrate", "check", "--app", "shop:app")
    assert behind.returncode == 1
    assert f"platform tables at revision none, the code needs {platform_head()}" in behind.stdout
    assert "entity table shop_notes does not exist" in behind.stdout
    assert "Run 'asanoha migrate --app shop:app' first." in behind.stdout

    assert project.run("migrate", "--app", "shop:app").returncode == 0
    current = project.run("migrate", "check", "--app", "shop:app")
    assert current.returncode == 0, current.stdout
    assert current.stdout.strip() == f"schema is current (platform revision {platform_head()})"


def test_serve_refuses_a_database_that_is_behind(project: Project) -> None:
    refused = project.run("serve", "--app", "shop:app", "--port", "1")
    assert refused.returncode == 1
    # One line: what the database lacks, and the command to run.
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: the database schema is behind the code (")
    assert "Run 'asanoha migrate --app shop:app' first." in refused.stderr
    assert table_names(project) == set()  # serve does not change a Postgres schema


def test_a_new_field_needs_a_revision_which_migrate_then_applies(project: Project) -> None:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    project.write_shop(with_colour=True)

    refused = project.run("worker", "--app", "shop:app")
    assert refused.returncode == 1
    assert "column shop_notes.colour does not exist" in refused.stderr
    assert "asanoha migrate revision --app shop:app" in refused.stderr

    written = project.run("migrate", "revision", "--app", "shop:app", "-m", "add colour")
    assert written.returncode == 0, written.stdout + written.stderr
    # The first revision of a project whose tables exist: those tables, then the change.
    initial, path = re.findall(r"wrote (\S+)", written.stdout)
    assert initial.endswith("_initial_entity_tables.py")
    source = (project.folder / "migrations" / "versions").joinpath(path.rsplit("/", 1)[-1])
    text = source.read_text(encoding="utf-8")
    assert "op.add_column('shop_notes', sa.Column('colour'" in text
    assert "asanoha_" not in text  # the platform's tables are not the application's to migrate

    applied = project.run("migrate", "--app", "shop:app")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "application tables: migrations in migrations applied" in applied.stdout
    assert project.run("migrate", "check", "--app", "shop:app").returncode == 0
