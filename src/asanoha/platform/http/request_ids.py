"""``X-Request-ID`` and ``X-Correlation-ID``: read and sanitised, or minted; echoed on the response."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = "X-Request-ID"
CORRELATION_ID_HEADER = "X-Correlation-ID"
MAX_ID_LENGTH = 128
# Ids end up in logs, event metadata and response headers: keep them to a safe alphabet.
_UNSAFE = re.compile(r"[^A-Za-z0-9._:@/+=-]")


def sanitize_id(value: str | None) -> str | None:
    """``value`` without unsafe characters and cut to 128 characters; ``None`` when nothing is left."""
    if value is None:
        return None
    cleaned = _UNSAFE.sub("", value)[:MAX_ID_LENGTH]
    return cleaned or None


def mint_id() -> str:
    """A fresh id."""
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Stores ``request_id`` and ``correlation_id`` in the request state and echoes both.

    A request without a correlation id starts a new correlation named after its request id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        request_id = sanitize_id(headers.get(REQUEST_ID_HEADER)) or mint_id()
        correlation_id = sanitize_id(headers.get(CORRELATION_ID_HEADER)) or request_id
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["correlation_id"] = correlation_id

        async def send_with_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                response_headers[REQUEST_ID_HEADER] = request_id
                response_headers[CORRELATION_ID_HEADER] = correlation_id
            await send(message)

        await self.app(scope, receive, send_with_ids)


def request_ids_of(request: Request) -> tuple[str | None, str | None]:
    """``(request_id, correlation_id)`` of a request that passed the middleware."""
    state = request.scope.get("state", {})
    return state.get("request_id"), state.get("correlation_id")
