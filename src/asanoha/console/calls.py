"""The console's calls of the bundled admin handlers, through the service layer as the
signed-in principal: the same access, gates and audit events as ``/api/query`` and
``/api/write``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from asanoha.platform.errors import AsanohaError
from asanoha.platform.http.read_after import note_write, read_after_of
from asanoha.platform.http.routes import request_meta
from asanoha.platform.model import SessionUser
from asanoha.platform.service import Service


@dataclass(frozen=True)
class Answer:
    """A handler's data, or the error it answered (shown on the page, never raised)."""

    data: Any = None
    error: AsanohaError | None = None

    @property
    def ok(self) -> bool:
        """Whether the handler answered with data."""
        return self.error is None


async def query(
    service: Service, request: Request, user: SessionUser, qn: str, payload: dict[str, Any]
) -> Answer:
    """Run the query handler ``qn`` as ``user``."""
    return await _call(service, request, user, "query", qn, payload)


async def write(
    service: Service, request: Request, user: SessionUser, qn: str, payload: dict[str, Any]
) -> Answer:
    """Run the write handler ``qn`` as ``user``."""
    return await _call(service, request, user, "write", qn, payload)


async def _call(
    service: Service,
    request: Request,
    user: SessionUser,
    kind: str,
    qn: str,
    payload: dict[str, Any],
) -> Answer:
    meta = request_meta(request)

    def call() -> Any:
        if kind == "query":
            # The browser's read-after cookie keeps an operator on its own changes when the
            # pages read a replica.
            after = read_after_of(request)
            return service.dispatch_query(qn, payload, user, meta=meta, read_after=after)
        data = service.dispatch_write(qn, payload, user, meta=meta)
        note_write(request, service)
        return data

    try:
        # Handlers are synchronous: off the event loop, as the API runs them.
        return Answer(await run_in_threadpool(call))
    except AsanohaError as error:
        return Answer(error=error)
