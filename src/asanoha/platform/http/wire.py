"""The wire format: success and error envelopes, with the user message in the caller's language."""

from __future__ import annotations

import json
import logging
import re
import traceback
from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python
from starlette.requests import Request
from starlette.responses import JSONResponse

from asanoha.platform.errors import AsanohaError, InternalError, pick_language, render
from asanoha.platform.errors.database import database_failure

log = logging.getLogger("asanoha.http")
# A lone UTF-16 half has no UTF-8 form; an error that echoes one must still be sent.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: Seconds a client should wait before retrying a 503.
RETRY_AFTER_SECONDS = 1


class WireResponse(JSONResponse):
    """JSON in UTF-8 that never fails to encode: lone surrogates become U+FFFD."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")


class ErrorInfo(BaseModel):
    """The ``error`` member of a failed call."""

    code: str = Field(description="stable error class, e.g. validation_error, access_denied")
    reason: str = Field(description="why it failed; one of the documented reasons")
    message: str = Field(description="developer text (English)")
    userMessage: str = Field(description="end-user text in the language of Accept-Language")
    details: dict[str, Any] = Field(default_factory=dict)
    requestId: str | None = None


class ErrorEnvelope(BaseModel):
    """The body of every failed call."""

    isSuccess: bool = False
    error: ErrorInfo


class SuccessEnvelope(BaseModel):
    """The body of every successful call; ``data`` is what the handler returned."""

    isSuccess: bool = True
    data: Any = None


def to_json_data(value: Any) -> Any:
    """Plain JSON data: UUIDs, datetimes and decimals (as strings) included."""
    return to_jsonable_python(value, serialize_unknown=True)


def success_response(data: Any, status_code: int = 200) -> JSONResponse:
    """``{"isSuccess": true, "data": ...}``."""
    return WireResponse({"isSuccess": True, "data": to_json_data(data)}, status_code=status_code)


def request_id_of(request: Request) -> str | None:
    """The request id the request-id middleware stored, if it ran."""
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None


def error_body(error: AsanohaError, *, request_id: str | None, language: str) -> dict[str, Any]:
    """``{"isSuccess": false, "error": {...}}`` for ``error``."""
    return {
        "isSuccess": False,
        "error": {
            "code": error.code,
            "reason": str(error.reason),
            "message": error.message,
            "userMessage": render(error.reason, error.details, "end_user", language),
            "details": to_json_data(error.details),
            "requestId": request_id,
        },
    }


def error_response(request: Request, error: AsanohaError) -> JSONResponse:
    """The response for an error a handler or the HTTP layer raised."""
    language = pick_language(request.headers.get("accept-language"))
    body = error_body(error, request_id=request_id_of(request), language=language)
    headers: dict[str, str] = {}
    if error.http_status == 401:
        # RFC 6750: a 401 names the scheme the client should use.
        headers["WWW-Authenticate"] = "Bearer"
    if error.http_status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if error.http_status == 429:
        headers.update(rate_limit_headers(error.details))
    return WireResponse(body, status_code=error.http_status, headers=headers or None)


def rate_limit_headers(details: dict[str, Any]) -> dict[str, str]:
    """``Retry-After`` and the ``RateLimit-*`` fields (IETF draft) of a 429's details."""
    retry_after = str(details.get("retry_after", RETRY_AFTER_SECONDS))
    headers = {"Retry-After": retry_after, "RateLimit-Reset": retry_after}
    if "limit" in details:
        headers["RateLimit-Limit"] = str(details["limit"])
        headers["RateLimit-Remaining"] = str(details.get("remaining", 0))
        if "window_seconds" in details:
            headers["RateLimit-Policy"] = f"{details['limit']};w={details['window_seconds']}"
    return headers


def internal_error_response(
    request: Request, exc: BaseException, *, development: bool
) -> JSONResponse:
    """The answer to an exception no handler turned into an error.

    A database that cannot serve (503) or a transaction that lost to another (409) is
    answered as such; anything else is a 500 ``internal_error`` whose stack trace goes to
    the log, and to the body only in development.
    """
    failure = database_failure(exc)
    if failure is not None:
        log.warning("database failure in request %s: %s", request_id_of(request), exc)
        return error_response(request, failure)
    request_id = request_id_of(request)
    log.error("unexpected error in request %s", request_id, exc_info=exc)
    details: dict[str, Any] = {"request_id": request_id}
    if development:
        details["exception"] = repr(exc)
        details["traceback"] = traceback.format_exception(exc)
    return error_response(request, InternalError(**details))
