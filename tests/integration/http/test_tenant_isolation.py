"""The tenant comes from the token: another tenant neither sees nor changes a row."""

from __future__ import annotations

from sqlalchemy import select

from asanoha.testing import Stack, TestUsers
from tests.integration.http.conftest import assert_error, nothing_written

CREATE = "catalog:write:item:create"
UPDATE = "catalog:write:item:update"
LIST = "catalog:query:item:list"
DETAIL = "catalog:query:item:detail"


def test_rows_are_written_to_the_tenant_of_the_token(stack: Stack) -> None:
    row = stack.http.write_ok(CREATE, {"name": "a"}, TestUsers.admin)
    assert row["tenant_id"] == "tenant-a"
    other = stack.http.write_ok(CREATE, {"name": "b"}, TestUsers.other_tenant)
    assert other["tenant_id"] == "tenant-b"


def test_a_tenant_in_the_payload_is_refused_not_obeyed(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(
            CREATE, {"name": "a", "tenant_id": "tenant-b"}, TestUsers.admin
        )
    assert_error(error, 400, "validation_error", "validation_failed")
    assert [entry["path"] for entry in error.details["fields"]] == ["tenant_id"]


def test_another_tenant_does_not_see_rows(stack: Stack) -> None:
    row = stack.http.write_ok(CREATE, {"name": "mine"}, TestUsers.admin)
    theirs = stack.http.query_ok(LIST, {}, TestUsers.other_tenant)
    assert theirs["rows"] == []
    error = stack.http.query_err(DETAIL, {"id": row["id"]}, TestUsers.other_tenant)
    assert_error(error, 404, "not_found", "entity_not_found")
    mine = stack.http.query_ok(LIST, {}, TestUsers.admin)
    assert [r["id"] for r in mine["rows"]] == [row["id"]]


def test_another_tenant_cannot_update_a_row(stack: Stack) -> None:
    row = stack.http.write_ok(CREATE, {"name": "mine"}, TestUsers.admin)
    error = stack.http.write_err(
        UPDATE,
        {"id": row["id"], "version": 1, "changes": {"name": "theirs"}},
        TestUsers.other_tenant,
    )
    assert error.http_status in (404, 409)
    table = stack.tables.entity("catalog:item")
    with stack.db.connect() as conn:
        names = conn.execute(select(table.c.name, table.c.tenant_id)).all()
    assert names == [("mine", "tenant-a")]
