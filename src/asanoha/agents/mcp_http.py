"""The MCP server over streamable HTTP, as an ASGI endpoint the API app mounts at ``/mcp``.

Before the SDK sees a request, the endpoint applies what the API applies to every request:
a valid bearer token (401), the body size limit (413) and the JSON depth limit (400
``json_too_deep``), with the API's own functions; and it hands the SDK the caller's tenant
and principal, so a session answers only the principal that opened it (404 to anyone else).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from asanoha.platform.errors import AsanohaError, Reasons, ValidationError
from asanoha.platform.http.auth import authenticate_request, verifier_of
from asanoha.platform.http.limits import exceeds_depth, read_body, replay_body
from asanoha.platform.http.wire import error_response
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings


class McpHttpEndpoint:
    """ASGI endpoint: refuses a request without a valid bearer token (401 in the API's wire
    format) or beyond the API's body limits (413, 400), then hands it to the SDK's
    streamable-HTTP session manager.

    The manager can run once; each lifespan of the hosting app starts a fresh one.
    """

    def __init__(
        self, server: Server[Any], settings: Settings, tokens: TokenVerifier | None = None
    ) -> None:
        self._server = server
        self._settings = settings
        self._tokens = verifier_of(tokens or settings)
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the session manager while the hosting app runs."""
        if self._manager is not None:
            raise RuntimeError("this MCP endpoint is already running; build another app")
        # No DNS-rebinding host check: callers authenticate with a bearer token on every
        # request, never with ambient credentials a rebound page could borrow.
        manager = StreamableHTTPSessionManager(
            app=self._server, max_request_body_size=self._settings.max_body_bytes
        )
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
            user = await authenticate_request(self._tokens, request)
            if request.method == "POST":
                receive = await self._checked_body(request)
        except AsanohaError as error:
            await error_response(request, error)(scope, receive, send)
            return
        if self._manager is None:
            raise RuntimeError("the MCP endpoint is not running: start the app's lifespan")
        await self._manager.handle_request(session_owner(scope, user), receive, send)

    async def _checked_body(self, request: Request) -> Receive:
        """Read the body within the API's limits; a ``receive`` that replays it to the SDK."""
        body = await read_body(request, self._settings.max_body_bytes)
        max_depth = self._settings.max_json_depth
        if exceeds_depth(body.decode("utf-8", errors="replace"), max_depth):
            raise ValidationError(Reasons.JSON_TOO_DEEP, max_depth=max_depth)
        # After the body: the client's disconnect, which the SDK waits for on streams.
        return replay_body(request, body)


def session_owner(scope: Scope, user: SessionUser) -> Scope:
    """``scope`` naming ``user`` as the SDK's authenticated user: the session manager binds a
    new session to it and answers 404 for the session to any other (tenant, principal)."""
    token = AccessToken(token="", client_id=user.tenant_id, subject=user.id, scopes=[])
    return {**scope, "user": AuthenticatedUser(token)}


def standalone_mcp_app(endpoint: McpHttpEndpoint, path: str = "/mcp") -> Starlette:
    """A Starlette app serving only ``endpoint`` at ``path`` (``asanoha mcp --transport http``)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with endpoint.lifespan():
            yield

    return Starlette(routes=[Route(path, endpoint=endpoint)], lifespan=lifespan)
