"""``GET /api/agent/tools``: the handlers agents may call, described as MCP-style tools."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.requests import Request

from asanoha.platform.http.routes import json_endpoint
from asanoha.platform.model import AgentExposure, HandlerDef, Registry, SessionUser
from asanoha.platform.model import resolve_agent_exposure as resolve

if TYPE_CHECKING:
    from asanoha.app import App


@functools.cache
def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a payload model (computed once per model)."""
    return model.model_json_schema()


def describe_tool(handler: HandlerDef, exposure: AgentExposure) -> dict[str, Any]:
    """One tool: name, description, input schema, resolved risk and MCP annotations.

    ``readOnlyHint`` marks queries; ``destructiveHint`` marks writes that resolve ``high``
    (hard deletes, instruction-field writes and whatever the feature declared high).
    """
    is_query = handler.kind == "query"
    return {
        "name": handler.qn,
        "description": handler.description or "",
        "kind": handler.kind,
        "endpoint": f"/api/{handler.kind}/{handler.qn}",
        "inputSchema": input_schema(handler.payload_model),
        "risk": exposure.risk,
        "annotations": {
            "title": handler.qn,
            "readOnlyHint": is_query,
            "destructiveHint": not is_query and exposure.risk == "high",
        },
    }


def agent_tools(registry: Registry, user: SessionUser) -> list[dict[str, Any]]:
    """The exposed handlers ``user`` may call, in registration order."""
    tools = []
    for handler in registry.handlers:
        exposure = resolve(handler)
        if exposure.expose and handler.access.admits(user):
            tools.append(describe_tool(handler, exposure))
    return tools


def add_agent_tools_route(api: FastAPI, app: App) -> None:
    """Register ``GET /api/agent/tools``. Without a token it lists the public tools only."""

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        return {"tools": agent_tools(app.registry, user)}

    api.add_api_route(
        "/api/agent/tools",
        json_endpoint(app, call, allow_anonymous=True),
        methods=["GET"],
        name="agent-tools",
        summary="The handlers agents may call, as tools with JSON schemas and risk hints",
        tags=["agent"],
        response_model=None,
    )
