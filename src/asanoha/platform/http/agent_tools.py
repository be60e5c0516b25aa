"""``GET /api/agent/tools``: the handlers agents may call, described as MCP-style tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.requests import Request

from asanoha.platform.http.openapi import SchemaCatalogue
from asanoha.platform.http.routes import json_endpoint, operation_doc, request_meta
from asanoha.platform.model import SessionUser
from asanoha.platform.model.agent_tools import list_agent_tools

#: The bundled handler behind the approvals route (``asanoha.handlers.agent_approvals``).
APPROVE_QN = "agent:write:approve"

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts


def add_agent_tools_route(api: FastAPI, app: HttpParts) -> None:
    """Register ``GET /api/agent/tools``. Without a token it lists the public tools only."""

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        return {"tools": [tool.to_json() for tool in list_agent_tools(app.registry, user)]}

    api.add_api_route(
        "/api/agent/tools",
        json_endpoint(app, call, allow_anonymous=True),
        methods=["GET"],
        name="agent-tools",
        summary="The handlers agents may call, as tools with JSON schemas and risk hints",
        tags=["agent"],
        response_model=None,
    )


def add_approvals_route(api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue) -> None:
    """Register ``POST /api/agent/approvals``: a human approves one agent call (the same as
    ``POST /api/write/agent:write:approve``), answering the single-use token."""

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        return app.service.dispatch_write(APPROVE_QN, body, user, meta=request_meta(request))

    api.add_api_route(
        "/api/agent/approvals",
        json_endpoint(app, call),
        methods=["POST"],
        name="agent-approvals",
        summary="Approve one high-risk call by an agent; answers a single-use approval token",
        tags=["agent"],
        response_model=None,
        # The body, answers and security of the handler it runs.
        openapi_extra=operation_doc(app.registry.handler(APPROVE_QN), catalogue),
    )
