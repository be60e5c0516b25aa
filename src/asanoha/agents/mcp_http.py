"""The MCP server over streamable HTTP, as an ASGI endpoint the API app mounts at ``/mcp``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from asanoha.platform.errors import AsanohaError
from asanoha.platform.http.auth import authenticate
from asanoha.platform.http.wire import error_response
from asanoha.platform.settings import Settings


class McpHttpEndpoint:
    """ASGI endpoint: refuses a request without a valid bearer token (401 in the API's wire
    format), then hands it to the SDK's streamable-HTTP session manager.

    The manager can run once; each lifespan of the hosting app starts a fresh one.
    """

    def __init__(self, server: Server[Any], settings: Settings) -> None:
        self._server = server
        self._settings = settings
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the session manager while the hosting app runs."""
        if self._manager is not None:
            raise RuntimeError("this MCP endpoint is already running; build another app")
        # No DNS-rebinding host check: callers authenticate with a bearer token on every
        # request, never with ambient credentials a rebound page could borrow.
        manager = StreamableHTTPSessionManager(app=self._server)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        try:
            authenticate(self._settings, request.headers.get("authorization"))
        except AsanohaError as error:
            await error_response(request, error)(scope, receive, send)
            return
        if self._manager is None:
            raise RuntimeError("the MCP endpoint is not running: start the app's lifespan")
        await self._manager.handle_request(scope, receive, send)


def standalone_mcp_app(endpoint: McpHttpEndpoint, path: str = "/mcp") -> Starlette:
    """A Starlette app serving only ``endpoint`` at ``path`` (``asanoha mcp --transport http``)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with endpoint.lifespan():
            yield

    return Starlette(routes=[Route(path, endpoint=endpoint)], lifespan=lifespan)
