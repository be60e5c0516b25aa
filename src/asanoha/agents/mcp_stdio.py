"""The MCP server over stdio: one agent session per process, its caller from a token."""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from asanoha.agents.mcp_callers import McpCallers
from asanoha.agents.mcp_server import build_mcp_server
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.service import Service
from asanoha.platform.settings import Settings


async def serve_stdio(service: Service, settings: Settings | TokenVerifier, token: str) -> None:
    """Serve MCP on stdin/stdout until the client closes; every call acts as ``token``'s user."""
    server = build_mcp_server(service, McpCallers(settings, stdio_token=token))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
