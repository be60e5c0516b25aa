"""Stream handlers as MCP resources: a caller lists those it may open and reads what each
makes of the newest events it may see (hidden fields left out, other tenants' events
absent); one it may not open answers as unknown."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from asanoha.platform.model import SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from tests.integration.agents.test_mcp_http import mcp_session
from tests.integration.feed.features import crm

ADMIN, USER = TestUsers.admin, TestUsers.user
ASSISTANT = SessionUser.of("assistant-r", ADMIN.tenant_id, ["User"]).as_agent("run-r")
BOARD = "asanoha://stream/crm:stream:board"


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[crm])


def test_an_agent_reads_a_stream_handler_as_a_resource(stack: Stack) -> None:
    for title, cost in (("first", 10), ("second", 20)):
        stack.http.write_ok("crm:write:ticket:create", {"title": title, "cost": cost}, ADMIN)
    stack.http.write_ok("crm:write:ticket:create", {"title": "elsewhere"}, TestUsers.other_tenant)
    stack.http.write_ok("crm:write:audit:create", {"what": "admins only"}, ADMIN)

    async def scenario(base_url: str, user: SessionUser) -> tuple[set[str], Any]:
        async with mcp_session(f"{base_url}/mcp", stack, user) as session:
            listed = {str(r.uri) for r in (await session.list_resources()).resources}
            read = await session.read_resource(BOARD)
            return listed, read

    with serve_in_thread(stack.app.build_http()) as base_url:
        listed, read = anyio.run(scenario, base_url, ASSISTANT)
        admin_listed, admin_read = anyio.run(scenario, base_url, ADMIN)

        async def audit_as_assistant() -> int:
            async with mcp_session(f"{base_url}/mcp", stack, ASSISTANT) as session:
                try:
                    await session.read_resource("asanoha://stream/crm:stream:audit-trail")
                except MCPError as error:
                    return error.code
            raise AssertionError("the audit trail was read")

        unknown = anyio.run(audit_as_assistant)

    # The audit trail is for admins: not listed, and unknown when asked for.
    assert listed == {BOARD}
    assert admin_listed == {BOARD, "asanoha://stream/crm:stream:audit-trail"}
    assert unknown == -32002
    [content] = read.contents
    assert content.mime_type == "application/json"
    board = json.loads(content.text)
    # Oldest first, only the caller's tenant, and the cost (admins only) left out.
    assert [(row["title"], row["cost"]) for row in board] == [("first", None), ("second", None)]
    assert [row["cost"] for row in json.loads(admin_read.contents[0].text)] == [10, 20]
