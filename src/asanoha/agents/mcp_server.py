"""``build_mcp_server``: the application's exposed handlers as MCP tools (official MCP SDK),
and its stream handlers as MCP resources.

The tool list is ``list_agent_tools`` for the caller (the same list as ``/api/agent/tools``
and ``asanoha tools``). A tool call is a top-level dispatch through the service layer, so the
called handler is the entry handler and every gate applies; the caller is an agent principal,
so a high-risk write runs only with a human's approval token.

Each stream handler the caller may open is a resource ``asanoha://stream/<qn>`` (JSON): what
it makes of the newest events the caller may see (``feed.snapshot``); one it may not open
answers as unknown, as a tool does.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import mcp_types as types
import pydantic_core
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from asanoha.agents.mcp_callers import McpCallers
from asanoha.agents.mcp_results import error_result, success_result
from asanoha.agents.trust import label_result
from asanoha.platform.errors import AsanohaError, NotFoundError, Reasons
from asanoha.platform.feed.access import FeedAccess
from asanoha.platform.feed.reader import FeedReader
from asanoha.platform.feed.snapshot import handler_qn_of, recent_messages, resource_uri
from asanoha.platform.model import SessionUser
from asanoha.platform.model.agent_tools import AgentTool, find_agent_tool, list_agent_tools
from asanoha.platform.model.scopes import admits_caller
from asanoha.platform.service import RequestMeta, Service
from asanoha.platform.service.idempotency import (
    IDEMPOTENCY_META_KEY,
    IDEMPOTENT_REPLAYED_META_KEY,
    Replay,
)
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.platform_events import PLATFORM_EVENT_TYPES

#: Request ``_meta`` key of a tool call carrying a human's approval token.
APPROVAL_META_KEY = "asanoha.dev/approval"
#: Request ``_meta`` key naming the agent run a call belongs to (recorded with provenance).
AGENT_RUN_META_KEY = "asanoha.dev/agentRun"
#: JSON-RPC error code of an unknown resource (the MCP specification's).
RESOURCE_NOT_FOUND = -32002

Context = ServerRequestContext[Any, Any]


def to_mcp_tool(tool: AgentTool) -> types.Tool:
    """An ``AgentTool`` as an MCP ``Tool``: schema, derived annotations, risk under ``_meta``."""
    return types.Tool.model_validate(
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": tool.hints.annotations(tool.name),
            "_meta": tool.hints.meta(),
        }
    )


def build_mcp_server(service: Service, callers: McpCallers, name: str = "asanoha") -> Server[Any]:
    """A low-level MCP server whose tools are ``service``'s exposed handlers."""
    registry = service.registry

    async def list_tools(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        user = await callers.caller(ctx.request)
        return types.ListToolsResult(
            tools=[to_mcp_tool(tool) for tool in list_agent_tools(registry, user)]
        )

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta: dict[str, Any] = dict(params.meta or {})
        tool_call = str(ctx.request_id) if ctx.request_id is not None else None
        run = meta.get(AGENT_RUN_META_KEY)
        try:
            user = await callers.caller(ctx.request, run if isinstance(run, str) else None)
        except AsanohaError as error:
            return error_result(error, tool_call)
        tool = find_agent_tool(registry, user, params.name)
        if tool is None:
            # Not listed for this caller: answer as if it did not exist.
            return error_result(NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=params.name))
        token = meta.get(APPROVAL_META_KEY)
        key = meta.get(IDEMPOTENCY_META_KEY)
        arguments = params.arguments or {}
        try:
            return await anyio.to_thread.run_sync(
                lambda: _dispatch(service, tool, arguments, user, token, tool_call, key)
            )
        except AsanohaError as error:
            return error_result(error, tool_call)

    access = FeedAccess(registry, service.owner_rules, service.operator_tenant, files=service.files)
    types_read = [event.qn for event in registry.events] + list(PLATFORM_EVENT_TYPES)
    reader = FeedReader(service.database, service.tables, access, service.personal, types_read)

    async def list_resources(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        user = await callers.caller(ctx.request)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=resource_uri(handler),
                    name=handler.qn,
                    description=handler.description,
                    mime_type="application/json",
                )
                for handler in registry.streams
                if admits_caller(user, handler.qn, handler.access)
            ]
        )

    async def read_resource(
        ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        user = await callers.caller(ctx.request)
        uri = str(params.uri)
        qn = handler_qn_of(uri)
        handler = None if qn is None else registry.stream(qn)
        if handler is None or not admits_caller(user, handler.qn, handler.access):
            # One the caller may not open answers as if it did not exist.
            raise MCPError(RESOURCE_NOT_FOUND, f"no resource {uri}")
        messages = await anyio.to_thread.run_sync(
            lambda: recent_messages(service.database, service.tables, reader, access, handler, user)
        )
        text = pydantic_core.to_json(messages, serialize_unknown=True).decode()
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    return Server(
        name,
        instructions=(
            "Tools are this application's handlers. Annotations derive from each handler's "
            "risk; a tool marked 'approval required' runs only with a human's approval token "
            f"in the call's _meta under {APPROVAL_META_KEY!r} (mint it with agent:write:approve)."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _dispatch(
    service: Service,
    tool: AgentTool,
    arguments: dict[str, Any],
    user: SessionUser,
    token: Any,
    tool_call: str | None,
    idempotency_key: Any = None,
) -> types.CallToolResult:
    meta = RequestMeta(causation_id=f"mcp:{tool_call}" if tool_call else None)
    # Queries and writes alike hand rows to their handler; what they read or wrote of a
    # read_as_instruction field labels the result.
    reads = InstructionReads()
    if tool.handler.kind == "write":
        replay = Replay()
        try:
            data = service.dispatch_write(
                tool.name,
                arguments,
                user,
                meta=meta,
                approval=token if isinstance(token, str) else None,
                reads=reads,
                # Checked there: a key that is not a string is refused, not ignored.
                idempotency_key=idempotency_key,
                replay=replay,
            )
        except AsanohaError as error:
            if not replay.replayed:
                raise
            return _replayed(error_result(error, tool_call))
        result = success_result(data, label_result(service, user, reads))
        return _replayed(result) if replay.replayed else result
    data = service.dispatch_query(tool.name, arguments, user, meta=meta, reads=reads)
    return success_result(data, label_result(service, user, reads))


def _replayed(result: types.CallToolResult) -> types.CallToolResult:
    """Mark ``result`` as the stored outcome of an earlier call with the same key."""
    result.meta = {**(result.meta or {}), IDEMPOTENT_REPLAYED_META_KEY: True}
    return result
