"""``GET /health`` (the process answers) and ``GET /health/ready`` (its dependencies answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from asanoha.platform.errors import ServiceUnavailableError
from asanoha.platform.http.wire import error_response, success_response

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts


def health_router(app: HttpParts) -> APIRouter:
    """The health endpoints of ``app``."""
    router = APIRouter(tags=["health"])

    @router.get("/health", summary="The process is up")
    async def health() -> JSONResponse:
        return success_response({"status": "ok"})

    @router.get("/health/ready", summary="The process can serve calls (database and broker answer)")
    async def ready(request: Request) -> JSONResponse:
        checks = {
            name: await run_in_threadpool(check) for name, check in app.readiness_checks().items()
        }
        if any(result != "ok" for result in checks.values()):
            return error_response(request, ServiceUnavailableError(checks=checks))
        return success_response({"status": "ready", "checks": checks})

    return router
