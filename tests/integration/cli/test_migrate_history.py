"""A project's migrations, as its author makes them with ``asanoha migrate revision``, build a
new empty database, on Postgres and SQLite, however the development database began."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from asanoha.platform.store.database import normalize_url
from asanoha.testing.databases import DatabaseKind, TestDatabase
from tests.integration.cli.conftest import Project

SHOP = """
from asanoha import Access, App, Entity, Feature, fields

feature = Feature("shop")
note = Entity(
    table="shop_notes",
    fields={{
        "text": fields.text(personal=False, reason="fixture", filterable=True),
        "amount": fields.decimal(),{colour}
    }},
)
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
{tags}

@feature.consumer("count", on=["shop:event:note.created"])
def count(event, ctx):
    pass


app = App([feature])
"""
COLOUR = '\n        "colour": fields.text(personal=False, reason="fixture"),'
TAGS = """
tag = Entity(
    table="shop_tags",
    fields={{
        "label": fields.text(personal=False, reason="fixture"),{weight}
    }},
    unique=[["label"]],
)
feature.crud("tag", tag, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
"""
WEIGHT = '\n        "weight": fields.integer(),'

NewDatabase = Callable[[], TestDatabase]


def write_shop(project: Project, *, colour: bool, tags: bool = False, weight: bool = False) -> None:
    tags_source = TAGS.format(weight=WEIGHT if weight else "") if tags else ""
    source = SHOP.format(colour=COLOUR if colour else "", tags=tags_source)
    (project.folder / "shop.py").write_text(source, encoding="utf-8")


def columns_of(database: TestDatabase) -> dict[str, set[str]]:
    """The application's tables of ``database`` with their columns."""
    engine = create_engine(normalize_url(database.url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            return {
                name: {column["name"] for column in inspector.get_columns(name)}
                for name in inspector.get_table_names()
                if name.startswith("shop_")
            }
    finally:
        engine.dispose()


@pytest.fixture(params=["postgres", "sqlite"])
def kind(request: pytest.FixtureRequest) -> DatabaseKind:
    kind: DatabaseKind = request.param
    return kind


@pytest.fixture
def new_database(kind: DatabaseKind) -> Iterator[NewDatabase]:
    """Makes empty databases of the parametrized kind, dropped after the test."""
    made: list[TestDatabase] = []

    def make() -> TestDatabase:
        made.append(TestDatabase.create(kind, f"asanoha_hist_{uuid.uuid4().hex[:12]}"))
        return made[-1]

    yield make
    for database in made:
        database.drop()


@pytest.fixture
def project(tmp_path: Path, new_database: NewDatabase) -> Project:
    """A project folder whose development database is empty."""
    return Project(tmp_path, new_database())


def revise(project: Project, message: str) -> list[str]:
    """``asanoha migrate revision`` on the development database; the files it wrote."""
    written = project.run("migrate", "revision", "--app", "shop:app", "-m", message)
    assert written.returncode == 0, written.stdout + written.stderr
    # Reflecting the platform's tables (tx_id xid8 on Postgres) would warn: they are not read.
    assert "Warning" not in written.stderr and "xid8" not in written.stderr, written.stderr
    return [Path(path).name for path in re.findall(r"wrote (\S+)", written.stdout)]


def migrate(project: Project, database: TestDatabase | None = None) -> None:
    """``asanoha migrate``, then ``asanoha migrate check``, on ``database``; both succeed."""
    done = project.run("migrate", "--app", "shop:app", database=database)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "application tables: migrations in migrations applied" in done.stdout
    check = project.run("migrate", "check", "--app", "shop:app", database=database)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_migrations_build_an_empty_database_after_one_two_and_three_revisions(
    project: Project, new_database: NewDatabase
) -> None:
    # The workflow of docs/guides/migrations.md: tables made by migrate before the project has migrations, then
    # an entity change and its first revision, against that development database.
    write_shop(project, colour=False)
    made = project.run("migrate", "--app", "shop:app")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "application tables: missing entity tables created" in made.stdout

    write_shop(project, colour=True)
    first = revise(project, "add colour")
    # The tables the database had come first, so that the history starts with them.
    assert [re.sub(r"^[0-9a-f]+_", "", name) for name in first] == [
        "initial_entity_tables.py",
        "add_colour.py",
    ]
    versions = project.folder / "migrations" / "versions"
    initial = (versions / first[0]).read_text(encoding="utf-8")
    assert "op.create_table('shop_notes'" in initial
    assert "sa.Column('colour'" not in initial  # added by the next revision
    assert "asanoha" not in initial  # no platform table, no import of asanoha's types
    change = (versions / first[1]).read_text(encoding="utf-8")
    assert "add_column(" in change and "sa.Column('colour'" in change
    migrate(project)  # the development database is taken to be at the initial revision
    fresh = new_database()
    migrate(project, fresh)
    assert columns_of(fresh) == columns_of(project.database)
    assert "colour" in columns_of(fresh)["shop_notes"]

    write_shop(project, colour=True, tags=True)
    (second,) = revise(project, "add tags")
    assert "op.create_table('shop_tags'" in (versions / second).read_text(encoding="utf-8")
    migrate(project)
    fresh = new_database()
    migrate(project, fresh)
    assert columns_of(fresh) == columns_of(project.database)

    write_shop(project, colour=False, tags=True, weight=True)
    (third,) = revise(project, "weigh tags drop colour")
    third_source = (versions / third).read_text(encoding="utf-8")
    assert "'weight'" in third_source and "'colour'" in third_source
    migrate(project)
    fresh = new_database()
    migrate(project, fresh)
    assert columns_of(fresh) == columns_of(project.database)
    assert "colour" not in columns_of(fresh)["shop_notes"]
    assert "weight" in columns_of(fresh)["shop_tags"]


def make_tables_with_create_schema(project: Project, database: TestDatabase) -> None:
    """A script's ``app.create_schema()`` in the project folder before it had migrations."""
    subprocess.run(
        [sys.executable, "-c", "from shop import app; app.create_schema()"],
        cwd=project.folder,
        env=project.env(database),
        check=True,
    )


def test_a_first_revision_of_a_database_made_by_create_schema_creates_no_table_twice(
    project: Project, new_database: NewDatabase
) -> None:
    write_shop(project, colour=False)
    make_tables_with_create_schema(project, project.database)

    # Nothing changed since: one revision, which creates the tables that database has.
    (initial,) = revise(project, "initial")
    source = (project.folder / "migrations" / "versions" / initial).read_text(encoding="utf-8")
    assert "op.create_table('shop_notes'" in source
    migrate(project)  # no "table shop_notes already exists"
    fresh = new_database()
    migrate(project, fresh)
    assert columns_of(fresh) == columns_of(project.database) != {}


def test_a_first_revision_made_on_an_empty_database_adopts_one_made_by_create_schema(
    project: Project, new_database: NewDatabase
) -> None:
    write_shop(project, colour=False)
    older = new_database()
    make_tables_with_create_schema(project, older)

    # Another developer's empty database: autogenerate creates every table.
    (initial,) = revise(project, "initial")
    source = (project.folder / "migrations" / "versions" / initial).read_text(encoding="utf-8")
    assert "op.create_table('shop_notes'" in source
    migrate(project)
    migrate(project, older)  # taken to be at the first revision: nothing created twice
    assert columns_of(older) == columns_of(project.database) != {}
