"""A list's search (the searchable fields; Postgres full text, SQLite LIKE per word), its
exact total, and the refusals of cursors it did not issue and of searches it cannot serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from asanoha import App, Settings
from asanoha.platform import base64url
from asanoha.platform.store import keyset
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error
from tests.integration.lists.features import notes

ADMIN = TestUsers.admin
CREATE = "notes:write:note:create"
DELETE = "notes:write:note:delete"
LIST = "notes:query:note:list"
TAGS = "notes:query:tag:list"

NOTES = [
    {"title": "Stars over the harbour", "body": "a night walk", "rank": 1},
    {"title": "Harbour lights", "body": "the STARS came out late", "rank": 2},
    {"title": "Morning market", "body": "fish and bread", "rank": 3},
    {"title": "Night market", "body": None, "rank": 4},
    {"title": "Starlight 100%_done", "body": "kit", "rank": 5},
]


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: StackFactory) -> Stack:
    made = asanoha_stack(features=[notes], database=request.param)
    made.service.dispatch_batch([(CREATE, note) for note in NOTES], ADMIN)
    return made


def titles(answer: dict[str, Any]) -> list[str]:
    return [row["title"] for row in answer["rows"]]


def listed(stack: Stack, **payload: Any) -> dict[str, Any]:
    result: dict[str, Any] = stack.http.query_ok(LIST, {"sort": ["rank"], **payload}, ADMIN)
    return result


def test_search_keeps_rows_holding_every_word_in_any_searchable_field(stack: Stack) -> None:
    assert titles(listed(stack, search="stars")) == ["Stars over the harbour", "Harbour lights"]
    assert titles(listed(stack, search="HARBOUR stars")) == [
        "Stars over the harbour",
        "Harbour lights",
    ]
    assert titles(listed(stack, search="night market")) == ["Night market"]
    assert titles(listed(stack, search="market bread")) == ["Morning market"]
    assert titles(listed(stack, search="market stars")) == []


def test_search_matches_the_start_of_a_word(stack: Stack) -> None:
    # A prefix on Postgres, a part of the text on SQLite: both find these.
    assert titles(listed(stack, search="star")) == [
        "Stars over the harbour",
        "Harbour lights",
        "Starlight 100%_done",
    ]


def test_search_takes_punctuation_and_like_wildcards_as_separators(stack: Stack) -> None:
    assert titles(listed(stack, search="100%")) == ["Starlight 100%_done"]
    assert titles(listed(stack, search="%")) == titles(listed(stack))
    assert titles(listed(stack, search="_")) == titles(listed(stack))


def test_total_counts_every_matching_row_whatever_the_page(stack: Stack) -> None:
    first = listed(stack, limit=2, with_total=True)
    assert len(first["rows"]) == 2 and first["total"] == 5
    second = listed(stack, limit=2, with_total=True, cursor=first["next_cursor"])
    assert second["total"] == 5
    assert listed(stack, search="market", with_total=True)["total"] == 2
    assert listed(stack, filter={"rank": {"gte": 4}}, with_total=True)["total"] == 2
    assert "total" not in listed(stack)
    gone = listed(stack, search="starlight")["rows"][0]
    stack.http.write_ok(DELETE, {"id": gone["id"]}, ADMIN)
    assert listed(stack, with_total=True)["total"] == 4
    assert listed(stack, with_total=True, include_deleted=True)["total"] == 5


def test_search_pages_with_its_cursor(stack: Stack) -> None:
    first = listed(stack, search="star", limit=2)
    assert first["next_cursor"] is not None
    rest = listed(stack, search="star", limit=2, cursor=first["next_cursor"])
    assert titles(first) + titles(rest) == [
        "Stars over the harbour",
        "Harbour lights",
        "Starlight 100%_done",
    ]
    assert rest["next_cursor"] is None


def test_a_search_of_an_entity_without_searchable_fields_is_400_naming_it(stack: Stack) -> None:
    error = stack.http.query_err(TAGS, {"search": "x"}, ADMIN)
    assert_error(error, 400, "validation_error", "validation_failed")
    [field] = error.details["fields"]
    assert (field["path"], field["type"]) == ("search", "not_searchable")
    assert "notes:tag" in field["message"] and "searchable=True" in field["message"]


def cursor_error(stack: Stack, payload: dict[str, Any]) -> dict[str, Any]:
    error = stack.http.query_err(LIST, payload, ADMIN)
    assert_error(error, 400, "validation_error", "validation_failed")
    [field] = error.details["fields"]
    assert (field["path"], field["type"]) == ("cursor", "invalid_cursor")
    found: dict[str, Any] = field
    return found


def test_a_cursor_issued_before_the_upgrade_of_the_null_order_is_400(stack: Stack) -> None:
    cursor = listed(stack, limit=2)["next_cursor"]
    content = json.loads(base64url.decode(cursor.partition(".")[0]))
    # The same query and row, as the earlier release (nulls last both ways) sealed it.
    body = json.dumps({**content, "v": 1}).encode()
    earlier = f"{base64url.encode(body)}.{base64url.encode(keyset._seal(body))}"
    field = cursor_error(stack, {"sort": ["rank"], "limit": 2, "cursor": earlier})
    assert "another version" in field["message"] and "first page" in field["message"]


def test_a_changed_cut_or_foreign_cursor_is_400(stack: Stack) -> None:
    cursor = listed(stack, limit=2)["next_cursor"]
    body, _, seal = cursor.partition(".")
    changed = ("A" if body[3] != "A" else "B").join((body[:3], body[4:]))
    for bad in (f"{changed}.{seal}", body, cursor[:-2], "garbage", "%%%", "a.b.c"):
        assert "not a cursor this list returned" in cursor_error(stack, {"cursor": bad})["message"]
    foreign = cursor_error(stack, {"sort": ["-rank"], "cursor": cursor})
    assert "another query" in foreign["message"]
    searched = cursor_error(stack, {"sort": ["rank"], "search": "star", "cursor": cursor})
    assert "another query" in searched["message"]


def test_offset_and_cursor_together_are_400(stack: Stack) -> None:
    cursor = listed(stack, limit=2)["next_cursor"]
    error = stack.http.query_err(LIST, {"sort": ["rank"], "cursor": cursor, "offset": 2}, ADMIN)
    assert_error(error, 400, "validation_error", "validation_failed")
    assert [f["type"] for f in error.details["fields"]] == ["offset_with_cursor"]


def test_postgres_serves_the_search_from_its_gin_index(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[notes])
    with stack.db.connect() as conn:
        definition = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_list_notes_search'")
        ).scalar_one()
        assert "USING gin" in definition and "to_tsvector" in definition
        conn.execute(text("SET enable_seqscan = off"))
        table = stack.tables.entity("notes:note")
        from asanoha.platform.store.search import search_condition

        query = table.select().where(
            search_condition("postgresql", table, ["title", "body"], ["star"])
        )
        compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
        plan = "\n".join(conn.execute(text(f"EXPLAIN {compiled}")).scalars())
    assert "ix_list_notes_search" in plan, plan


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_migrate_revision_writes_the_gin_index_on_postgres_only(
    asanoha_stack: StackFactory, tmp_path: Path, database: str
) -> None:
    from asanoha.platform.store.migrations import write_app_revision

    stack = asanoha_stack(features=[], database=database)  # type: ignore[arg-type]
    app = App([notes], Settings(database_url=stack.app.settings.database_url))
    try:
        folder = tmp_path / "migrations"
        [first] = write_app_revision(folder, app.registry, app.database, "initial")
        written = first.read_text()
        assert ("ix_list_notes_search" in written) == (database == "postgres")
        if database == "postgres":
            assert "postgresql_using='gin'" in written and "to_tsvector" in written
        app.create_schema(migrations=folder)
        # The database now has what the code declares: the next revision changes nothing.
        [second] = write_app_revision(folder, app.registry, app.database, "again")
        upgrade = second.read_text().split("def upgrade")[1].split("def downgrade")[0]
        assert "op." not in upgrade, upgrade
    finally:
        app.close()
