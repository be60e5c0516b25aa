"""``GET /health`` (the process answers) and ``GET /health/ready`` (its database answers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from asanoha.platform.errors import ServiceUnavailableError
from asanoha.platform.http.wire import error_response, success_response
from asanoha.platform.store import Database

if TYPE_CHECKING:
    from asanoha.app import App


def check_database(database: Database) -> str:
    """``"ok"`` when ``SELECT 1`` answers, else the error text."""
    try:
        with database.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"


def health_router(app: App) -> APIRouter:
    """The health endpoints of ``app``."""
    router = APIRouter(tags=["health"])

    @router.get("/health", summary="The process is up")
    async def health() -> JSONResponse:
        return success_response({"status": "ok"})

    @router.get("/health/ready", summary="The process can serve calls (its database answers)")
    async def ready(request: Request) -> JSONResponse:
        checks = {"database": await run_in_threadpool(check_database, app.database)}
        if any(result != "ok" for result in checks.values()):
            return error_response(request, ServiceUnavailableError(checks=checks))
        return success_response({"status": "ready", "checks": checks})

    return router
