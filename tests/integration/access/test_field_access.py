"""Field access: a field the caller may not read never leaves the service layer (HTTP, MCP,
a job's trigger result); a write of a field the caller may not write is refused before
anything is written."""

from __future__ import annotations

from typing import Any

import anyio
from sqlalchemy import select

from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.access.features import ALICE, AUDITOR, HR, TRIGGER_RESULTS, owned
from tests.integration.agents.scenario import data_of
from tests.integration.agents.test_mcp_http import mcp_session

CREATE = "owned:write:note:create"
UPDATE = "owned:write:note:update"
LIST = "owned:query:note:list"
DETAIL = "owned:query:note:detail"


def _note(stack: Stack, salary: int = 5000) -> dict[str, Any]:
    row: dict[str, Any] = stack.http.write_ok(CREATE, {"title": "paid", "salary": salary}, HR)
    return row


def test_a_hidden_field_is_left_out_of_list_and_detail_over_http(stack: Stack) -> None:
    row = _note(stack)
    assert row["salary"] == 5000
    for caller in (AUDITOR, HR):
        listed = stack.http.query_ok(LIST, {}, caller)["rows"]
        detail = stack.http.query_ok(DETAIL, {"id": row["id"]}, caller)
        for shown in (*listed, detail):
            assert ("salary" in shown) is (caller is HR)
            assert shown["title"] == "paid"
    changed = stack.http.write_ok(
        UPDATE, {"id": row["id"], "version": 1, "changes": {"title": "renamed"}}, AUDITOR
    )
    assert "salary" not in changed
    assert "5000" not in str(changed)


def test_sorting_or_filtering_by_a_hidden_field_is_refused(stack: Stack) -> None:
    _note(stack)
    for payload in ({"sort": ["-salary"]}, {"filter": {"salary": {"gt": 4000}}}):
        refused = stack.http.query_err(LIST, payload, AUDITOR)
        assert (refused.http_status, refused.reason) == (403, "field_read_denied")
        assert refused.details["fields"] == ["salary"]
    assert len(stack.http.query_ok(LIST, {"filter": {"salary": {"gt": 4000}}}, HR)["rows"]) == 1


def test_a_search_matches_only_the_fields_the_caller_may_read(stack: Stack) -> None:
    stack.http.write_ok(CREATE, {"title": "paid", "review": "bonus ahead"}, HR)
    assert stack.http.query_ok(LIST, {"search": "bonus"}, AUDITOR)["rows"] == []
    assert len(stack.http.query_ok(LIST, {"search": "paid"}, AUDITOR)["rows"]) == 1
    assert len(stack.http.query_ok(LIST, {"search": "bonus"}, HR)["rows"]) == 1


def test_a_write_of_a_field_the_caller_may_not_write_is_refused_before_anything_is_written(
    stack: Stack,
) -> None:
    row = _note(stack)
    with stack.nothing_written():
        create = stack.http.write_err(CREATE, {"title": "raise", "salary": 1}, ALICE)
        update = stack.http.write_err(
            UPDATE,
            {"id": row["id"], "version": 1, "changes": {"salary": 9000, "grade": "b"}},
            AUDITOR,
            headers={"Accept-Language": "de"},
        )
    assert (create.http_status, create.code, create.reason) == (
        403,
        "access_denied",
        "field_write_denied",
    )
    assert create.details["fields"] == ["salary"]
    assert update.details["fields"] == ["grade", "salary"]
    assert update.details["entity"] == "owned:note"
    assert update.details["handler"] == UPDATE
    assert update.user_message == "Sie dürfen einige dieser Angaben nicht ändern."
    # A default is the application's value, not the caller's: create without grade passes.
    assert stack.http.write_ok(CREATE, {"title": "plain"}, ALICE)["grade"] == "a"


def test_a_hidden_field_never_appears_in_an_mcp_tool_result(stack: Stack) -> None:
    row = _note(stack)

    async def scenario(base_url: str) -> list[Any]:
        async with mcp_session(f"{base_url}/mcp", stack, AUDITOR) as session:
            listed = await session.call_tool(LIST, {})
            detail = await session.call_tool(DETAIL, {"id": row["id"]})
            return [listed, detail]

    with serve_in_thread(stack.app.build_http()) as base_url:
        listed, detail = anyio.run(scenario, base_url)
    assert data_of(listed)["rows"][0]["title"] == "paid"
    assert data_of(detail)["title"] == "paid"
    for result in (listed, detail):
        assert "salary" not in str(result.structured_content)
        assert "salary" not in result.content[0].text
        assert "5000" not in result.content[0].text


def test_a_hidden_field_never_appears_in_a_jobs_trigger_result(
    asanoha_stack: StackFactory, database: str
) -> None:
    stack = asanoha_stack(features=[owned], jobs=True, database=database)
    row = _note(stack)
    TRIGGER_RESULTS.clear()
    stack.http.write_ok("owned:write:touch-note", {"id": row["id"]}, AUDITOR)
    stack.http.write_ok("owned:write:touch-note", {"id": row["id"]}, HR)
    stack.drain()
    by_salary = sorted(TRIGGER_RESULTS, key=lambda result: "salary" in result)
    assert [result["title"] for result in by_salary] == ["paid", "paid"]
    assert "salary" not in by_salary[0]
    assert by_salary[1]["salary"] == 5000
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        stored = conn.execute(select(outbox.c.trigger_result)).scalars().all()
    # The job rows keep the result as each caller saw it.
    assert sorted("salary" in result for result in stored) == [False, True]
