"""``GET /health`` (the process answers), ``GET /health/ready`` (this process can serve: the
database answers) and ``GET /health/jobs`` (the job pipeline: broker, due-job backlog,
published jobs nobody claimed).

Readiness is only what this process needs to answer calls: a write commits its job rows
whatever the broker does, and the relay publishes them later, so a broker outage or a fleet
without workers must not take the API out of service. ``/health/jobs`` is for alerts and
the console.

The endpoints answer unauthenticated callers, so a check's answer is a short cause
(``unreachable``); the exception behind it goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from asanoha.platform.errors import ServiceUnavailableError
from asanoha.platform.http.wire import error_response, success_response

if TYPE_CHECKING:
    from asanoha.platform.http.parts import HttpParts

log = logging.getLogger("asanoha.http.health")
#: What a check that raised answers; the exception is logged.
UNREACHABLE = "unreachable"
#: A check returns ``"ok"`` or a short cause, and raises when it cannot reach what it checks.
HealthCheck = Callable[[], str]
UNAVAILABLE: dict[int | str, dict[str, object]] = {
    503: {"description": "A check failed; `error.details.checks` names it and its cause"}
}


def run_check(kind: str, name: str, check: HealthCheck) -> str:
    """``"ok"``, the check's short cause, or ``"unreachable"`` when it raised (logged)."""
    try:
        return check()
    except Exception as exc:
        log.warning("%s check %r failed: %s: %s", kind, name, type(exc).__name__, exc)
        return UNREACHABLE


async def run_checks(kind: str, checks: Mapping[str, HealthCheck]) -> dict[str, str]:
    """Every check's answer, in the threadpool (checks block on the network)."""
    return {
        name: await run_in_threadpool(run_check, kind, name, check)
        for name, check in checks.items()
    }


def health_router(app: HttpParts) -> APIRouter:
    """The health endpoints of ``app``."""
    router = APIRouter(tags=["health"])

    @router.get("/health", summary="The process is up")
    async def health() -> JSONResponse:
        return success_response({"status": "ok"})

    @router.get(
        "/health/ready",
        summary="This process can serve calls (the database answers)",
        responses=UNAVAILABLE,
    )
    async def ready(request: Request) -> JSONResponse:
        checks = await run_checks("readiness", app.readiness_checks())
        if any(result != "ok" for result in checks.values()):
            return error_response(request, ServiceUnavailableError(checks=checks))
        return success_response({"status": "ready", "checks": checks})

    @router.get(
        "/health/jobs",
        summary="The job pipeline works (broker reachable, due jobs published and claimed); "
        "for alerts",
        responses=UNAVAILABLE,
    )
    async def jobs(request: Request) -> JSONResponse:
        checks = await run_checks("jobs", app.job_health_checks())
        if any(result != "ok" for result in checks.values()):
            return error_response(request, ServiceUnavailableError(checks=checks))
        return success_response({"status": "ok", "checks": checks})

    return router
