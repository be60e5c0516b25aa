"""A new field's ``default=`` reaches the rows written before it existed: the revision that adds
its column backfills it, a filter on the default finds them, and a rebuild from the events
gives the same rows. Defaults SQL cannot write are named, not silently skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from asanoha import Access, App, Entity, Feature, fields
from asanoha.platform.settings import Settings
from asanoha.platform.store.migrations import write_app_revision
from asanoha.platform.store.rebuild import rebuild_guarded
from asanoha.testing import TestUsers
from asanoha.testing.plugin import StackFactory

CREATE, LIST = "desk:write:ticket:create", "desk:query:ticket:list"


def desk(*, with_new_fields: bool) -> Feature:
    declared = {"title": fields.text(required=True, personal=False, reason="a subject line")}
    if with_new_fields:
        declared |= {
            "priority": fields.text(
                personal=False, reason="a level", default="normal", filterable=True
            ),
            "points": fields.integer(default=3),
            "owner_email": fields.text(personal="tenant", default="desk@example.com"),
        }
    feature = Feature("desk")
    feature.crud(
        "ticket",
        Entity(table="desk_tickets", fields=declared),
        write=Access(roles=["Admin"]),
        read=Access(roles=["Admin"]),
    )
    return feature


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_revision_backfills_a_new_fields_default_and_a_rebuild_agrees(
    asanoha_stack: StackFactory, tmp_path: Path, database: str
) -> None:
    stack = asanoha_stack(features=[], database=database)  # type: ignore[arg-type]
    settings = Settings(database_url=stack.app.settings.database_url)
    folder = tmp_path / "migrations"

    before = App([desk(with_new_fields=False)], settings)
    try:
        write_app_revision(folder, before.registry, before.database, "initial")
        before.create_schema(migrations=folder)
        for title in ("old one", "old two"):
            before.service.dispatch_write(CREATE, {"title": title}, TestUsers.admin)
    finally:
        before.close()

    after = App([desk(with_new_fields=True)], settings)
    try:
        said: list[str] = []
        [revision] = write_app_revision(folder, after.registry, after.database, "fields", said)
        assert said == [
            "backfill: existing rows of desk_tickets.priority get 'normal'",
            "backfill: existing rows of desk_tickets.points get 3",
            "no backfill for desk_tickets.owner_email: it is personal (values are sealed per "
            "subject); existing rows hold NULL",
        ]
        assert "UPDATE desk_tickets SET priority = :value WHERE priority IS NULL" in (
            revision.read_text()
        )
        after.create_schema(migrations=folder)
        after.service.dispatch_write(CREATE, {"title": "new"}, TestUsers.admin)

        listed = after.service.dispatch_query(
            LIST, {"filter": {"priority": "normal"}}, TestUsers.admin
        )
        assert sorted(row["title"] for row in listed["rows"]) == ["new", "old one", "old two"]

        table = after.service.tables.entity("desk:ticket")
        columns = (table.c.title, table.c.priority, table.c.points)
        with after.database.connect() as conn:
            backfilled = sorted(conn.execute(select(*columns)).all())
        rebuild_guarded(after.database, after.service.tables, after.registry.entity("desk:ticket"))
        with after.database.connect() as conn:
            rebuilt = sorted(conn.execute(select(*columns)).all())
        assert (
            rebuilt
            == backfilled
            == [("new", "normal", 3), ("old one", "normal", 3), ("old two", "normal", 3)]
        )
    finally:
        after.close()
