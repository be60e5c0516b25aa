"""``asanoha mcp``: the application's exposed handlers as an MCP server (stdio or HTTP)."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.schema_gate import require_current_schema
from asanoha.cli.signing import refuse_insecure_signing


class Transport(StrEnum):
    """How the MCP client connects."""

    STDIO = "stdio"
    HTTP = "http"


def mcp(
    app: AppOption,
    transport: Annotated[
        Transport, typer.Option(help="stdio (one session, token from ASANOHA_MCP_TOKEN) or http.")
    ] = Transport.STDIO,
    host: Annotated[str, typer.Option(help="HTTP only: the interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP only: the port; the endpoint is /mcp.")] = 8765,
) -> None:
    """Serve the exposed handlers as MCP tools (refuses a schema that is behind).

    Over stdio every call acts as the user of the bearer token in ASANOHA_MCP_TOKEN; over
    HTTP each request carries its own 'Authorization: Bearer TOKEN'. The API app serves
    the same endpoint at /mcp. Refuses to start on the placeholder ASANOHA_JWT_SECRET outside
    development, a short secret or an unsupported algorithm, as the API does.
    """
    from asanoha.agents.mcp_callers import TOKEN_ENV

    loaded = load_app(app)
    refuse_insecure_signing(loaded)
    if transport is Transport.STDIO:
        import anyio

        from asanoha.agents.mcp_stdio import serve_stdio
        from asanoha.platform.errors import AsanohaError
        from asanoha.platform.http import decode_token

        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            raise typer.BadParameter(
                f"set {TOKEN_ENV} to a bearer token of the user the agent acts as",
                param_hint=TOKEN_ENV,
            )
        try:
            decode_token(loaded.tokens, token)
        except AsanohaError as error:
            raise typer.BadParameter(
                f"{error.reason}: {error.message}", param_hint=TOKEN_ENV
            ) from None
        require_current_schema(loaded, app)
        anyio.run(serve_stdio, loaded.service, loaded.tokens, token)
        return
    import uvicorn

    from asanoha.agents import McpCallers, build_mcp_server
    from asanoha.agents.mcp_http import McpHttpEndpoint, standalone_mcp_app

    require_current_schema(loaded, app)
    endpoint = McpHttpEndpoint(
        build_mcp_server(loaded.service, McpCallers(loaded.tokens)), loaded.settings, loaded.tokens
    )
    uvicorn.run(standalone_mcp_app(endpoint), host=host, port=port)
