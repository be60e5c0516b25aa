"""``build_http_app``: the FastAPI application of an application's parts."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from asanoha.platform.errors import AsanohaError, NotFoundError, Reasons
from asanoha.platform.http.agent_tools import add_agent_tools_route, add_approvals_route
from asanoha.platform.http.batch import add_batch_route, batch_request_model
from asanoha.platform.http.docs import add_docs_routes
from asanoha.platform.http.files import add_file_routes
from asanoha.platform.http.health import health_router
from asanoha.platform.http.metrics import JobHealthCollector, add_metrics_route
from asanoha.platform.http.mounts import AsgiMount, combined_lifespan
from asanoha.platform.http.openapi import SchemaCatalogue, install_openapi
from asanoha.platform.http.request_ids import RequestIdMiddleware
from asanoha.platform.http.revocation import add_revoke_route
from asanoha.platform.http.routes import add_handler_routes
from asanoha.platform.http.startup_freeze import freeze_after_startup
from asanoha.platform.http.stream import add_stream_routes, build_feed_hub
from asanoha.platform.http.tracing import trace_requests
from asanoha.platform.http.wire import (
    ErrorEnvelope,
    SuccessEnvelope,
    error_response,
    internal_error_response,
    request_id_of,
)
from asanoha.platform.metrics import DatabaseCollector
from asanoha.platform.settings import require_signing_settings

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

API_VERSION = "1"
log = logging.getLogger("asanoha.http")


def build_http_app(app: HttpParts, mounts: Sequence[AsgiMount] = ()) -> FastAPI:
    """Routes for every handler of ``app.registry``, batch, health and agent tools, and the
    ``mounts`` (for example the MCP endpoint) with their lifespans.

    Raises ``InsecureSettingsError`` on the placeholder JWT secret outside development, a
    short secret or an unsupported algorithm (``require_signing_settings``).
    """
    require_signing_settings(app.settings)
    if app.settings.uses_placeholder_secret and not app.settings.own_secret_disabled:
        log.warning(
            "ASANOHA_JWT_SECRET is not set: in development, bearer tokens are signed with a "
            "public placeholder"
        )
    features = ", ".join(feature.name for feature in app.registry.features)
    api = FastAPI(
        title="asanoha",
        version=API_VERSION,
        description=f"Write and query handlers of the features: {features or 'none'}.",
        docs_url=None,
        redoc_url=None,
        lifespan=freeze_after_startup(combined_lifespan(mounts)),
    )
    api.state.asanoha = app
    batch_model = batch_request_model(app.settings.max_batch_items)
    catalogue = SchemaCatalogue(
        [
            *(handler.payload_model for handler in app.registry.handlers),
            batch_model,
            SuccessEnvelope,
            ErrorEnvelope,
        ]
    )
    api.include_router(health_router(app))
    add_metrics_route(
        api,
        DatabaseCollector(
            app.database,
            app.service.tables,
            lambda: ((found.name, found.lag, found.status) for found in app.consumers.status()),
            unclaimed_after=app.settings.unclaimed_alert_seconds,
        ),
        JobHealthCollector(app.job_health_checks),
    )
    add_docs_routes(
        api, oidc_client_id=app.settings.oidc_client_id if app.settings.oidc_issuer else None
    )
    add_agent_tools_route(api, app)
    add_approvals_route(api, app, catalogue)
    add_batch_route(api, app, catalogue, batch_model)
    add_revoke_route(api, app, catalogue)
    add_file_routes(api, app, catalogue)
    add_handler_routes(api, app, catalogue)
    feed = build_feed_hub(app)
    api.state.asanoha_feed = feed
    add_stream_routes(api, app, feed)
    for mount in mounts:
        api.router.routes.append(Route(mount.path, endpoint=mount.app))
    add_error_handlers(api, app)
    api.add_middleware(RequestIdMiddleware)
    install_openapi(api, catalogue, oidc_issuer=app.settings.oidc_issuer)
    trace_requests(api)
    return api


def add_error_handlers(api: FastAPI, app: HttpParts) -> None:
    """Framework-level failures (unknown path, wrong method, anything unexpected) in the
    wire format. Handler calls answer their own errors in the endpoint."""

    async def asanoha_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AsanohaError)
        return error_response(request, exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return error_response(
                request, NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=request.url.path)
            )
        body = {
            "isSuccess": False,
            "error": {
                "code": "http_error",
                "reason": "http_error",
                "message": str(exc.detail),
                "userMessage": str(exc.detail),
                "details": {"status": exc.status_code},
                "requestId": request_id_of(request),
            },
        }
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        return internal_error_response(request, exc, development=app.settings.development)

    api.add_exception_handler(AsanohaError, asanoha_error)
    api.add_exception_handler(StarletteHTTPException, http_error)
    api.add_exception_handler(Exception, unexpected_error)
