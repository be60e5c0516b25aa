"""The tools an agent sees: one listing for ``GET /api/agent/tools``, the MCP server and
``asanoha tools``, so the three can never disagree."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from asanoha.platform.model.agent import resolve_agent_exposure
from asanoha.platform.model.agent_hints import ToolHints, derive_tool_hints
from asanoha.platform.model.handlers import HandlerDef
from asanoha.platform.model.registry import Registry
from asanoha.platform.model.scopes import admits_caller, grants_call
from asanoha.platform.model.users import SessionUser


@dataclass(frozen=True)
class AgentTool:
    """An exposed handler as a tool: name (its QN), description, input schema, hints."""

    handler: HandlerDef
    hints: ToolHints

    @property
    def name(self) -> str:
        """The tool name: the handler's qualified name."""
        return self.handler.qn

    @property
    def description(self) -> str:
        """The handler's description (only described handlers are exposed by default)."""
        return self.handler.description or ""

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the handler's payload model."""
        return input_schema(self.handler.payload_model)

    def to_json(self) -> dict[str, Any]:
        """The tool as ``GET /api/agent/tools`` lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.handler.kind,
            "endpoint": f"/api/{self.handler.kind}/{self.name}",
            "inputSchema": self.input_schema,
            "risk": self.hints.risk,
            "annotations": self.hints.annotations(self.name),
            "_meta": self.hints.meta(),
        }


@functools.cache
def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a payload model (computed once per model)."""
    return model.model_json_schema()


def list_agent_tools(registry: Registry, user: SessionUser | None = None) -> list[AgentTool]:
    """The exposed handlers, in registration order; with ``user``, only those it may call.

    Undescribed handlers stay invisible unless they declare ``Agent(expose=True)``.
    """
    return [
        AgentTool(handler, derive_tool_hints(handler))
        for handler in registry.handlers
        if resolve_agent_exposure(handler).expose
        and (user is None or admits_caller(user, handler.qn, handler.access))
    ]


def find_agent_tool(registry: Registry, user: SessionUser, name: str) -> AgentTool | None:
    """The tool ``name`` if ``user``'s roles reach it (listed unless a scoped token's
    scopes leave it out); otherwise ``None``."""
    handler = registry.find_handler(name)
    if handler is None or not resolve_agent_exposure(handler).expose:
        return None
    # Outside a scoped token's scopes it exists: the call is refused by name
    # (``token_scope_denied``).
    if not grants_call(user, handler.qn, handler.access):
        return None
    return AgentTool(handler, derive_tool_hints(handler))
