"""``POST /api/write/{qn}`` and ``POST /api/query/{qn}``: one route per registered handler."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from asanoha.platform.errors import AsanohaError, NotFoundError, Reasons
from asanoha.platform.http.access_docs import access_extensions
from asanoha.platform.http.auth import authenticate_request
from asanoha.platform.http.limits import read_json_body
from asanoha.platform.http.openapi import BEARER_SCHEME, SchemaCatalogue, json_body
from asanoha.platform.http.read_after import mark_read_after, note_write, read_after_of
from asanoha.platform.http.request_ids import request_ids_of
from asanoha.platform.http.wire import (
    ErrorEnvelope,
    SuccessEnvelope,
    error_response,
    internal_error_response,
    success_response,
)
from asanoha.platform.model import HandlerDef, Registry, SessionUser, resolve_agent_exposure
from asanoha.platform.model.place import preferred_language
from asanoha.platform.service import RequestMeta
from asanoha.platform.service.idempotency import IDEMPOTENCY_HEADER, REPLAYED_HEADER, Replay

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

Endpoint = Callable[[Request], Coroutine[Any, Any, Response]]
#: What a route does once the caller is known and the body is parsed.
Call = Callable[[Request, SessionUser, Any], Any]


def request_meta(request: Request) -> RequestMeta:
    """The request and correlation ids of ``request``, for event metadata and job headers."""
    request_id, correlation_id = request_ids_of(request)
    return RequestMeta(
        request_id=request_id,
        correlation_id=correlation_id,
        client_ip=request.client.host if request.client else None,
        locale=preferred_language(request.headers.get("accept-language")),
    )


def replay_of(request: Request) -> Replay:
    """Where the service notes that it answered ``request`` with a stored outcome (an
    idempotent repeat); the endpoint reads it to send ``Idempotent-Replayed``."""
    replay = Replay()
    request.state.replay = replay
    return replay


def mark_replayed(request: Request, response: Response) -> Response:
    """``Idempotent-Replayed: true`` on the answer to a repeat."""
    replay = getattr(request.state, "replay", None)
    if isinstance(replay, Replay) and replay.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    return response


def json_endpoint(app: HttpParts, call: Call, *, allow_anonymous: bool = False) -> Endpoint:
    """An endpoint that authenticates, reads the JSON body within the limits, runs ``call``
    in the threadpool (handlers are synchronous) and answers in the wire format.

    Every failure is answered here, so an error never leaves the endpoint as an exception.
    """
    settings = app.settings
    tokens = app.tokens

    async def endpoint(request: Request) -> Response:
        try:
            user = await authenticate_request(tokens, request, allow_anonymous=allow_anonymous)
            body = await read_json_body(
                request, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
            )
            result = await run_in_threadpool(call, request, user, body)
        except AsanohaError as error:
            return mark_replayed(request, error_response(request, error))
        except Exception as exc:
            return internal_error_response(request, exc, development=settings.development)
        response = success_response(result)
        return mark_read_after(request, mark_replayed(request, response), settings.replica_max_lag)

    return endpoint


#: The header that carries an approval token on the HTTP API (MCP: ``_meta``).
APPROVAL_HEADER = "X-Asanoha-Approval"


def handler_call(app: HttpParts, handler: HandlerDef) -> Call:
    """Dispatch to ``handler`` through the service (the one place payloads are validated)."""
    service = app.service

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        meta = request_meta(request)
        if handler.kind == "query":
            read_after = read_after_of(request) if handler.replica else None
            return service.dispatch_query(handler.qn, body, user, meta=meta, read_after=read_after)
        # An agent principal's high-risk write runs only with a human's approval token.
        approval = request.headers.get(APPROVAL_HEADER)
        result = service.dispatch_write(
            handler.qn,
            body,
            user,
            meta=meta,
            approval=approval,
            idempotency_key=request.headers.get(IDEMPOTENCY_HEADER),
            replay=replay_of(request),
        )
        note_write(request, service)
        return result

    return call


def unknown_handler_call(kind: str) -> Call:
    """Answer 404 ``handler_not_found`` for a name no handler of ``kind`` has."""

    def call(request: Request, user: SessionUser, body: Any) -> Any:
        qn = request.path_params["qn"]
        raise NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=qn, kind=kind)

    return call


def needs_body(model: type[BaseModel]) -> bool:
    """Whether ``model`` has a required field (else an empty body, read as ``{}``, is valid)."""
    return any(field.is_required() for field in model.model_fields.values())


def operation_doc(
    handler: HandlerDef, catalogue: SchemaCatalogue, registry: Registry | None = None
) -> dict[str, Any]:
    """The OpenAPI extras of a handler route: its payload model, envelopes and security,
    and with ``registry`` its owner rule and guarded fields (see ``access_docs``)."""
    exposure = resolve_agent_exposure(handler)
    security: list[dict[str, list[str]]] = [{BEARER_SCHEME: []}]
    if handler.access.public:
        security.insert(0, {})
    return {
        "requestBody": {
            # An empty body is read as {}: a body is required only where {} is no payload.
            "required": needs_body(handler.payload_model),
            "content": json_body(catalogue.ref(handler.payload_model)),
        },
        "responses": {
            "200": {
                "description": "The handler's data",
                "content": json_body(catalogue.ref(SuccessEnvelope)),
            },
            "default": {
                "description": "An error",
                "content": json_body(catalogue.ref(ErrorEnvelope)),
            },
        },
        "security": security,
        "x-asanoha-risk": exposure.risk,
        "x-asanoha-access": handler.access.describe(),
        **access_extensions(handler, registry),
    }


def add_handler_routes(api: FastAPI, app: HttpParts, catalogue: SchemaCatalogue) -> None:
    """One route per handler, then the catch-all that answers ``handler_not_found``."""
    for handler in app.registry.handlers:
        api.add_api_route(
            f"/api/{handler.kind}/{handler.qn}",
            json_endpoint(
                app, handler_call(app, handler), allow_anonymous=bool(handler.access.public)
            ),
            methods=["POST"],
            name=handler.qn,
            operation_id=handler.qn,
            summary=handler.qn,
            description=handler.description or "",
            tags=[handler.feature],
            openapi_extra=operation_doc(handler, catalogue, app.registry),
            response_model=None,
        )
    for kind in ("write", "query"):
        api.add_api_route(
            f"/api/{kind}/{{qn:path}}",
            json_endpoint(app, unknown_handler_call(kind)),
            methods=["POST"],
            include_in_schema=False,
            response_model=None,
        )
