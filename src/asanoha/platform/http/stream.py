"""``/api/stream``: the live feed (``platform/feed``) as Server-Sent Events.

``GET /api/stream?types=crm:event:ticket.*&stream=<id>&after=<id>`` (or ``POST`` with
``{"types": [...], "streams": [...], "after": N}`` for long filters). The token comes in the
``Authorization`` header or, since a browser's ``EventSource`` cannot send headers, as
``access_token=``. A reconnecting ``EventSource`` sends ``Last-Event-ID``, which wins over
``after``. Each message's ``id`` is the event's global position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from asanoha.platform.errors import AsanohaError, NotFoundError, Reasons
from asanoha.platform.feed import FeedAccess, FeedFilter, FeedHub, FeedReader
from asanoha.platform.feed.filters import FEED
from asanoha.platform.http.auth import authenticate_off_loop, bearer_token
from asanoha.platform.http.event_stream import EventStreamResponse
from asanoha.platform.http.limits import read_json_body
from asanoha.platform.http.openapi import BEARER_SCHEME
from asanoha.platform.http.wire import error_response, internal_error_response
from asanoha.platform.model import SessionUser
from asanoha.platform.model.handlers import StreamHandlerDef
from asanoha.platform.service.admission import check_caller
from asanoha.platform.service.platform_events import PLATFORM_EVENT_TYPES
from asanoha.platform.service.validation import invalid_field

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

STREAM_PATH = "/api/stream"
#: The query parameter that carries the token for clients that cannot send headers.
TOKEN_PARAMETER = "access_token"


def build_feed_hub(app: HttpParts) -> FeedHub:
    """The feed of this API process, woken by the service's commits."""
    service = app.service
    access = FeedAccess(
        app.registry, service.owner_rules, app.settings.operator_tenant, files=service.files
    )
    types = [event.qn for event in app.registry.events] + list(PLATFORM_EVENT_TYPES)
    settings = app.settings
    reader = FeedReader(
        app.database,
        service.tables,
        access,
        service.personal,
        types,
        # A batch never holds more than a client's buffer: a client that keeps up never
        # overflows on one batch.
        limit=min(1000, settings.stream_buffer),
    )
    hub = FeedHub(
        reader,
        access,
        buffer=settings.stream_buffer,
        poll_interval=settings.stream_poll_interval,
        revoked=app.tokens.is_revoked,
    )
    service.add_commit_listener(hub.notify)
    return hub


def add_stream_routes(api: FastAPI, app: HttpParts, hub: FeedHub) -> None:
    """``GET`` and ``POST /api/stream``."""
    settings = app.settings

    async def open_stream(request: Request, values: dict[str, Any]) -> Response:
        handler: StreamHandlerDef | None = None
        try:
            token = _token(request)
            # The verifier every route uses: revocations, personal access tokens and the
            # provider's cached key set hold for a stream as for a call.
            user = await authenticate_off_loop(
                app.tokens, None if token is None else f"Bearer {token}"
            )
            qn = request.path_params.get("qn")
            if qn is not None:
                handler = _stream_handler(app, qn, user)
            filter = FeedFilter.parse(values["types"], values["streams"])
            if handler is not None:
                # The handler's types, narrowed to the stream ids asked for.
                filter = FeedFilter(handler.on, filter.streams)
            after = _position(request.headers.get("last-event-id"), "Last-Event-ID")
            if after is None:
                after = _position(values["after"], "after")
        except AsanohaError as error:
            return error_response(request, error)
        except Exception as exc:
            return internal_error_response(request, exc, development=settings.development)
        subscription = await hub.subscribe(
            user,
            filter,
            after=after,
            expires_at=None if user.token_expires is None else float(user.token_expires),
            handler=handler,
            heartbeat=settings.stream_heartbeat,
        )
        return EventStreamResponse(hub.messages(subscription), close=subscription.close)

    async def stream_get(request: Request) -> Response:
        query = request.query_params
        return await open_stream(
            request,
            {
                "types": query.getlist("types"),
                "streams": query.getlist("stream"),
                "after": query.get("after"),
            },
        )

    async def stream_post(request: Request) -> Response:
        try:
            body = await read_json_body(
                request, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
            )
            values = _body_values(body)
        except AsanohaError as error:
            return error_response(request, error)
        return await open_stream(request, values)

    security: list[dict[str, list[str]]] = [{BEARER_SCHEME: []}]
    responses = {
        "200": {
            "description": "Server-Sent Events: one message per event the caller may read",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        "400": {"description": "A parameter is malformed"},
        "401": {"description": "No valid token"},
    }
    parameters = [
        _parameter("types", "Event-type patterns (`crm:event:ticket.*`); none: every type"),
        _parameter("stream", "Stream ids; none: every stream"),
        _parameter("after", "Resume after this global position (else: from the head)", "int"),
        _parameter(TOKEN_PARAMETER, "The bearer token, for clients that cannot send headers"),
    ]
    body = {
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "types": {"type": "array", "items": {"type": "string"}},
                        "streams": {"type": "array", "items": {"type": "string"}},
                        "after": {"type": "integer", "minimum": 0},
                    },
                    "additionalProperties": False,
                }
            }
        }
    }
    api.add_api_route(
        STREAM_PATH,
        stream_get,
        methods=["GET"],
        operation_id="stream_events",
        summary="Follow committed events live (Server-Sent Events)",
        openapi_extra={"parameters": parameters, "security": security, "responses": responses},
        include_in_schema=True,
    )
    api.add_api_route(
        STREAM_PATH,
        stream_post,
        methods=["POST"],
        operation_id="stream_events_filtered",
        summary="Follow committed events live, with the filter in a JSON body",
        openapi_extra={
            "security": security,
            "responses": responses,
            "requestBody": body,
        },
        include_in_schema=True,
    )
    # The stream handlers: ``/api/stream/<qn>`` (the handler decides the types).
    qn_parameter = {
        "name": "qn",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "The stream handler (`<feature>:stream:<name>`)",
    }
    handler_responses = {
        **responses,
        "403": {"description": "The caller may not open this stream"},
        "404": {"description": "No such stream handler"},
    }
    api.add_api_route(
        f"{STREAM_PATH}/{{qn}}",
        stream_get,
        methods=["GET"],
        operation_id="stream_handler_events",
        summary="Follow a stream handler's feed live (Server-Sent Events)",
        openapi_extra={
            "parameters": [qn_parameter, *parameters[1:]],
            "security": security,
            "responses": handler_responses,
        },
        include_in_schema=True,
    )
    api.add_api_route(
        f"{STREAM_PATH}/{{qn}}",
        stream_post,
        methods=["POST"],
        operation_id="stream_handler_events_filtered",
        summary="Follow a stream handler's feed live, with the filter in a JSON body",
        openapi_extra={
            "parameters": [qn_parameter],
            "security": security,
            "responses": handler_responses,
            "requestBody": body,
        },
        include_in_schema=True,
    )


def _stream_handler(app: HttpParts, qn: str, user: SessionUser) -> StreamHandlerDef:
    """The stream handler ``qn`` if ``user`` may open it (404 / 403 as for handlers)."""
    handler = app.registry.stream(qn)
    if handler is None:
        raise NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=qn, kind="stream")
    check_caller(user, handler.qn, handler.access)
    return handler


def _token(request: Request) -> str | None:
    header = bearer_token(request.headers.get("authorization"))
    return header if header is not None else request.query_params.get(TOKEN_PARAMETER)


def _position(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise invalid_field(FEED, name, "int_parsing", f"{name}: a global position (an integer >= 0)")


def _body_values(body: Any) -> dict[str, Any]:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise invalid_field(FEED, "$", "dict_type", "the body is a JSON object")
    unknown = set(body) - {"types", "streams", "after"}
    if unknown:
        name = sorted(unknown)[0]
        raise invalid_field(FEED, name, "extra_forbidden", f"{name}: not a filter of the feed")
    return {
        "types": _strings(body.get("types", []), "types"),
        "streams": _strings(body.get("streams", []), "streams"),
        "after": body.get("after"),
    }


def _strings(value: Any, name: str) -> Iterable[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid_field(FEED, name, "list_type", f"{name}: a list of strings")
    return value


def _parameter(name: str, description: str, kind: str = "list") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": 0}
    if kind == "list":
        schema = {"type": "array", "items": {"type": "string"}}
    if name == TOKEN_PARAMETER:
        schema = {"type": "string"}
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def feed_of(api: FastAPI) -> FeedHub:
    """The feed hub of an app ``build_http_app`` made."""
    hub = api.state.asanoha_feed
    assert isinstance(hub, FeedHub)
    return hub


__all__ = ["STREAM_PATH", "add_stream_routes", "build_feed_hub", "feed_of"]
