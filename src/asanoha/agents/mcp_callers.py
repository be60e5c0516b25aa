"""Who calls an MCP tool: authenticated like the HTTP API, and always an agent principal."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request as HttpRequest

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.http.auth import authenticate, decode_token, verifier_of
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings

#: The environment variable ``asanoha mcp`` reads the stdio caller's bearer token from.
TOKEN_ENV = "ASANOHA_MCP_TOKEN"


class McpCallers:
    """Resolves the caller of each MCP message.

    Over HTTP every message carries the bearer token of its own POST (checked on every call,
    so an expired or revoked session key stops working mid-session); over stdio the token
    given at start, decoded again per call so its expiry holds.
    """

    def __init__(self, tokens: Settings | TokenVerifier, stdio_token: str | None = None) -> None:
        self._tokens = verifier_of(tokens)
        self._stdio_token = stdio_token

    async def caller(self, http_request: Any, agent_run: str | None = None) -> SessionUser:
        """``user_of`` in a worker thread when checking the token may wait on the identity
        provider or the database, so the event loop never does."""
        if self._tokens.may_block:
            return await anyio.to_thread.run_sync(self.user_of, http_request, agent_run)
        return self.user_of(http_request, agent_run)

    def user_of(self, http_request: Any, agent_run: str | None = None) -> SessionUser:
        """The caller, marked as an agent principal (every MCP session is one).

        ``agent_run`` (from the call's ``_meta``) names the run; else the token's ``agent``
        claim; else ``"mcp"``.
        """
        if isinstance(http_request, HttpRequest):
            user = authenticate(self._tokens, http_request.headers.get("authorization"))
        elif self._stdio_token:
            user = decode_token(self._tokens, self._stdio_token)
        else:
            raise AuthenticationError(Reasons.TOKEN_MISSING)
        return user.as_agent(agent_run or user.agent or "mcp")
