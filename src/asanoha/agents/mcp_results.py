"""Handler outcomes as MCP tool results: data, errors, approval requests and trust labels."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic_core import to_jsonable_python

from asanoha.platform.errors import AsanohaError, Reasons
from asanoha.platform.model.agent_hints import META_KEY


def success_result(data: Any, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    """The handler's data as JSON text and as structured content (``{"data": ...}``)."""
    plain = to_jsonable_python(data)
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(plain, ensure_ascii=False))],
        structured_content={"data": plain},
        is_error=False,
        _meta={META_KEY: meta} if meta else None,
    )


def error_result(error: AsanohaError, tool_call: str | None = None) -> types.CallToolResult:
    """A tool error the model and the harness can read: code, reason, message, details.

    ``agent.approval_required`` also carries, under ``_meta``, what a harness needs to ask a
    human: the handler, the payload digest, a summary with the old and new instruction text,
    and the tool call id to record with the approval.
    """
    body: dict[str, Any] = to_jsonable_python(error.to_dict())
    if tool_call is not None:
        body["tool_call"] = tool_call
    meta: dict[str, Any] | None = None
    text = f"{error.code} ({error.reason}): {error.message}"
    if error.reason == Reasons.AGENT_APPROVAL_REQUIRED:
        details = body.get("details", {})
        meta = {
            META_KEY: {
                "approval": "approval required",
                "handler": details.get("handler"),
                "payload_digest": details.get("payload_digest"),
                "tool_call": tool_call,
            }
        }
        text = f"{text}\n{details.get('summary', '')}"
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content={"error": body},
        is_error=True,
        _meta=meta,
    )
