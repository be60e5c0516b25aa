"""``GET /api/agent/tools``: exposed handlers with schema, risk and MCP-style annotations."""

from __future__ import annotations

from typing import Any

from asanoha.testing import Stack, TestUsers


def tools_for(stack: Stack, user: Any) -> dict[str, dict[str, Any]]:
    response = stack.http.client.get("/api/agent/tools", headers=stack.http.headers_for(user))
    assert response.status_code == 200
    return {tool["name"]: tool for tool in response.json()["data"]["tools"]}


def test_only_exposed_handlers_are_listed(stack: Stack) -> None:
    tools = tools_for(stack, TestUsers.admin)
    assert set(tools) == {
        "catalog:write:item:create",
        "catalog:write:item:update",
        "catalog:write:item:delete",
        "catalog:query:item:list",
        "catalog:write:rename-all",
    }


def test_tool_carries_description_schema_and_risk(stack: Stack) -> None:
    tool = tools_for(stack, TestUsers.admin)["catalog:write:item:create"]
    assert tool["description"] == "Create a catalog item."
    assert tool["risk"] == "mid"
    assert tool["endpoint"] == "/api/write/catalog:write:item:create"
    schema = tool["inputSchema"]
    assert schema["type"] == "object"
    assert "name" in schema["required"]
    assert tool["annotations"] == {
        "title": "catalog:write:item:create",
        "readOnlyHint": False,
        "destructiveHint": False,
    }


def test_queries_are_read_only_and_hard_deletes_destructive(stack: Stack) -> None:
    tools = tools_for(stack, TestUsers.admin)
    listing = tools["catalog:query:item:list"]
    assert listing["risk"] == "low"
    assert listing["annotations"]["readOnlyHint"] is True
    assert "destructiveHint" not in listing["annotations"]
    delete = tools["catalog:write:item:delete"]
    assert delete["risk"] == "high"
    assert delete["annotations"] == {
        "title": "catalog:write:item:delete",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
    }
    assert delete["_meta"] == {
        "asanoha.dev/agent": {"risk": "high", "approval": "approval required"}
    }


def test_tools_are_filtered_by_the_callers_access(stack: Stack) -> None:
    assert set(tools_for(stack, TestUsers.user)) == {"catalog:query:item:list"}
    assert tools_for(stack, TestUsers.anonymous) == {}
