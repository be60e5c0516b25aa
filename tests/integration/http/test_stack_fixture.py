"""The stack fixture itself: own database, reset, statement capture, jobs switched off."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.testing import Stack, TestUsers
from asanoha.testing.databases import admin_url
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import count_rows
from tests.integration.http.features import catalog, gate

CREATE = "catalog:write:item:create"


def database_exists(name: str) -> bool:
    engine = create_engine(admin_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            query = text("SELECT count(*) FROM pg_database WHERE datname = :name")
            return bool(conn.execute(query, {"name": name}).scalar_one())
    finally:
        engine.dispose()


def test_each_stack_has_its_own_database_and_queue_prefix(asanoha_stack: StackFactory) -> None:
    first = asanoha_stack(features=[catalog])
    second = asanoha_stack(features=[catalog])
    assert first.database_name != second.database_name
    assert first.app.settings.queue_prefix != second.app.settings.queue_prefix
    first.http.write_ok(CREATE, {"name": "only in the first"}, TestUsers.admin)
    assert count_rows(second)["catalog:item"] == 0


def test_the_database_is_dropped_at_close(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[catalog])
    assert database_exists(stack.database_name)
    stack.close()
    assert not database_exists(stack.database_name)


def test_reset_empties_every_table(stack: Stack) -> None:
    stack.http.write_ok(CREATE, {"name": "x"}, TestUsers.admin)
    stack.reset()
    assert set(count_rows(stack).values()) == {0}


def test_capture_writes_records_inserts_but_not_reads(stack: Stack) -> None:
    with stack.capture_writes() as statements:
        stack.http.query_ok("catalog:query:item:list", {}, TestUsers.admin)
    assert statements == []
    with stack.capture_writes() as statements:
        stack.http.write_ok(CREATE, {"name": "x"}, TestUsers.admin)
    assert any(statement.lstrip().upper().startswith("INSERT") for statement in statements)


def test_drain_without_jobs_says_how_to_enable_them(stack: Stack) -> None:
    with pytest.raises(RuntimeError, match="jobs=True"):
        stack.drain()
    with pytest.raises(RuntimeError, match="jobs=True"):
        stack.dispatch_job("catalog:job:nothing", {})


def test_sqlite_stack_serves_the_same_api(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[gate, catalog], database="sqlite")
    assert stack.db.dialect == "sqlite"
    row = stack.http.write_ok(CREATE, {"name": "x", "price": "1.50"}, TestUsers.admin)
    error = stack.http.write_err(
        "instructiongate:write:create-prompt-mid", {"label": "x", "body": "y"}, TestUsers.admin
    )
    assert (error.http_status, error.reason) == (403, "instruction_field_write_requires_high_risk")
    listed = stack.http.query_ok("catalog:query:item:list", {}, TestUsers.admin)
    assert [item["id"] for item in listed["rows"]] == [row["id"]]


def test_settings_overrides_are_applied(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[catalog], settings={"max_body_bytes": 64})
    assert stack.app.settings.max_body_bytes == 64
    error = stack.http.write_err(CREATE, {"name": "x" * 100}, TestUsers.admin)
    assert (error.http_status, error.code) == (413, "payload_too_large")
