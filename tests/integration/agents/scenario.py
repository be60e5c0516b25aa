"""One MCP session against the agent suite's app, the same over stdio and streamable HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import mcp_types as types
from mcp import ClientSession

from asanoha.agents import APPROVAL_META_KEY
from asanoha.platform.model.agent_hints import META_KEY
from asanoha.testing import Stack, TestUsers
from tests.integration.agents.features import ASSISTANT

ASSISTANT_TOOLS = {
    "assist:write:prompt:create",
    "assist:write:prompt:update",
    "assist:query:prompt:list",
    "assist:query:prompt:detail",
    "assist:write:relabel",
}


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The structured error of a failed tool call."""
    assert result.is_error, result
    error: dict[str, Any] = result.structured_content["error"]
    return error


def data_of(result: types.CallToolResult) -> Any:
    """The handler's data of a successful tool call."""
    assert not result.is_error, result.content
    return result.structured_content["data"]


def approve(stack: Stack, payload: dict[str, Any], handler: str, **extra: Any) -> dict[str, Any]:
    """A human (TestUsers.admin) approves ``handler`` with ``payload`` for the assistant."""
    approval: dict[str, Any] = stack.http.write_ok(
        "agent:write:approve",
        {
            "handler": handler,
            "payload": payload,
            "principal": ASSISTANT.id,
            "channel": "test",
            "agent_run": "run-1",
            **extra,
        },
        TestUsers.admin,
    )
    return approval


async def call(
    session: ClientSession, name: str, arguments: dict[str, Any], token: str | None = None
) -> types.CallToolResult:
    """Call a tool, with an approval token in ``_meta`` when given."""
    meta: Any = {APPROVAL_META_KEY: token} if token else None
    return await session.call_tool(name, arguments, meta=meta)


async def check_tool_list(session: ClientSession) -> None:
    """Exactly the assistant's tools, with annotations derived from their risk."""
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == ASSISTANT_TOOLS
    create = listed["assist:write:prompt:create"]
    assert create.annotations is not None
    assert create.annotations.read_only_hint is False
    assert create.annotations.destructive_hint is True
    assert create.annotations.idempotent_hint is None
    assert create.meta == {META_KEY: {"risk": "high", "approval": "approval required"}}
    assert create.input_schema["type"] == "object"
    assert "label" in create.input_schema["properties"]
    update = listed["assist:write:prompt:update"]
    assert update.annotations is not None and update.annotations.idempotent_hint is True
    relabel = listed["assist:write:relabel"]
    assert relabel.annotations is not None
    assert (relabel.annotations.read_only_hint, relabel.annotations.destructive_hint) == (
        False,
        False,
    )
    assert relabel.meta == {META_KEY: {"risk": "mid"}}
    listing = listed["assist:query:prompt:list"]
    assert listing.annotations is not None and listing.annotations.read_only_hint is True
    assert listing.description == "List prompts."


@contextlib.contextmanager
def nothing_written(stack: Stack, *, same_process: bool) -> Iterator[None]:
    """``stack.nothing_written()`` when the server shares the stack's engine; across processes
    the statements cannot be captured, so the row counts of every table must stay."""
    if same_process:
        with stack.nothing_written():
            yield
        return
    before = stack.row_counts()
    yield
    assert stack.row_counts() == before


async def run_scenario(session: ClientSession, stack: Stack, *, same_process: bool) -> None:
    """Tool list, a low call, a high call without / with / re-using / misusing an approval, and
    a mid tool delegating into a high-risk handler."""
    await check_tool_list(session)

    listing = await call(session, "assist:query:prompt:list", {})
    assert data_of(listing)["rows"] == []

    payload = {"label": "greeting", "body": "Always answer in French."}
    with nothing_written(stack, same_process=same_process):
        denied = await call(session, "assist:write:prompt:create", payload)
    error = error_of(denied)
    assert error["code"] == "access_denied"
    assert error["reason"] == "agent.approval_required"
    details = error["details"]
    assert details["handler"] == "assist:write:prompt:create"
    assert details["changes"] == [
        {"entity": "assist:prompt", "field": "body", "old": None, "new": "Always answer in French."}
    ]
    assert "Always answer in French." in details["summary"]
    assert denied.meta is not None and denied.meta[META_KEY]["approval"] == "approval required"

    approval = approve(stack, payload, "assist:write:prompt:create")
    assert approval["payload_digest"] == details["payload_digest"]
    created = data_of(await call(session, "assist:write:prompt:create", payload, approval["token"]))
    assert created["body"] == "Always answer in French."

    with nothing_written(stack, same_process=same_process):
        replay = await call(session, "assist:write:prompt:create", payload, approval["token"])
    assert (error_of(replay)["code"], error_of(replay)["reason"]) == (
        "conflict",
        "agent.approval_used",
    )

    other = approve(stack, payload, "assist:write:prompt:create")
    edited = {**payload, "body": "Always answer in German."}
    with nothing_written(stack, same_process=same_process):
        mismatch = await call(session, "assist:write:prompt:create", edited, other["token"])
    assert (error_of(mismatch)["code"], error_of(mismatch)["reason"]) == (
        "access_denied",
        "agent.approval_invalid",
    )

    delegate = {"id": created["id"], "version": created["version"], "label": "x", "body": "Obey."}
    with nothing_written(stack, same_process=same_process):
        delegated = await call(session, "assist:write:relabel", delegate)
    assert error_of(delegated)["reason"] == "instruction_field_write_requires_high_risk"
    assert error_of(delegated)["details"]["handler"] == "assist:write:relabel"
