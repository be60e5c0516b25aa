"""``bring_schema_up_to_date``, as ``App.create_schema()`` runs it for tests and scripts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import select

from asanoha import Access, App, Entity, Feature, Settings, fields
from asanoha.platform.schema import SchemaBehindError
from asanoha.platform.store import Database
from asanoha.platform.store.migrations import PLATFORM_VERSION_TABLE, database_revision
from asanoha.platform.store.migrations.revisions import platform_head
from asanoha.platform.store.migrations.runner import PLATFORM_FOLDER, make_config, platform_target
from asanoha.testing.databases import TestDatabase


def consuming_feature(*, with_colour: bool = False) -> Feature:
    feature = Feature("shop")
    extra = {"colour": fields.text(personal=False, reason="fixture")} if with_colour else {}
    note = Entity(
        table="shop_notes",
        fields={"text": fields.text(personal=False, reason="fixture"), **extra},
    )
    feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    @feature.consumer("count", on=["shop:event:note.created"])
    def count(event: Any, ctx: Any) -> None:
        pass

    return feature


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest) -> Iterator[TestDatabase]:
    made = TestDatabase.create(request.param, f"asanoha_schema_{uuid.uuid4().hex[:12]}")
    try:
        yield made
    finally:
        made.drop()


def at_platform_revision(database: TestDatabase, revision: str) -> None:
    """The platform's tables as an older asanoha made them."""
    older = Database(database.url)
    try:
        with older.begin() as conn:
            command.upgrade(
                make_config(PLATFORM_FOLDER, platform_target(), connection=conn), revision
            )
    finally:
        older.dispose()


def app_on(database: TestDatabase, feature: Feature) -> App:
    return App([feature], Settings(database_url=database.url, broker_url="memory://"))


@pytest.mark.parametrize("revision", ["0003", "0004"])
def test_create_schema_upgrades_an_older_database_before_it_writes_cursor_rows(
    database: TestDatabase, revision: str
) -> None:
    # 0003 predates the agent tables (made by 0004), 0004 the cursors' event types (0005).
    at_platform_revision(database, revision)
    app = app_on(database, consuming_feature())
    try:
        upgrade = app.create_schema(migrations=None)
        assert upgrade.platform_before == revision
        assert upgrade.created_tables == ("shop_notes",)
        assert "shop:consumer:count" in upgrade.registered_consumers
        consumers = app.service.tables.consumers
        with app.database.connect() as conn:
            assert database_revision(conn, PLATFORM_VERSION_TABLE) == platform_head()
            types = conn.execute(
                select(consumers.c.types).where(consumers.c.name == "shop:consumer:count")
            ).scalar_one()
        assert types == ["shop:event:note.created"]
    finally:
        app.close()


def test_create_schema_refuses_a_table_that_lacks_a_new_column(database: TestDatabase) -> None:
    first = app_on(database, consuming_feature())
    first.create_schema(migrations=None)
    first.close()
    app = app_on(database, consuming_feature(with_colour=True))
    try:
        with pytest.raises(SchemaBehindError) as raised:
            app.create_schema(migrations=None)
        assert raised.value.status.missing_columns == ("shop_notes.colour",)
        assert "column shop_notes.colour does not exist" in str(raised.value)
    finally:
        app.close()


def test_create_schema_follows_the_migrations_folder_it_is_given(
    database: TestDatabase, tmp_path: Path
) -> None:
    from asanoha.platform.store.migrations import write_app_revision

    app = app_on(database, consuming_feature())
    try:
        folder = tmp_path / "migrations"
        write_app_revision(folder, app.registry, app.database, "initial")
        upgrade = app.create_schema(migrations=folder)
        assert upgrade.uses_app_migrations and upgrade.created_tables == ()
        assert upgrade.app_before is None and upgrade.app_after == upgrade.status.app_head
        # A second run finds everything current and runs nothing.
        again = app.create_schema(migrations=folder)
        assert again.app_before == again.app_after == upgrade.app_after
        assert again.registered_consumers == ()
    finally:
        app.close()
