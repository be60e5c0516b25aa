"""The span and the log fields of one top-level dispatch: a write, a query, a batch, and each
item of a batch, which is traced and logged as the single write it would be on its own.

One home for both, so that every way into a write is traced and logged alike."""

from __future__ import annotations

from types import TracebackType

from asanoha.platform import telemetry
from asanoha.platform.log_context import bound_log_fields
from asanoha.platform.model import SessionUser
from asanoha.platform.service.request import Request, RequestMeta


class observed:
    """``with observed("write", qn, user, meta) as span:`` opens the span of handler ``qn``
    (``kind``: ``write``, ``query`` or ``batch``) and binds the log fields of the call
    (request and correlation ids, tenant, handler) for the block; an error leaving the
    block is the span's outcome.

    A class rather than a generator-based context manager: it runs on every dispatch.
    """

    __slots__ = ("_fields", "_span")

    def __init__(self, kind: str, qn: str, user: SessionUser, meta: RequestMeta | None) -> None:
        self._span = telemetry.dispatch_span(kind, qn, user.tenant_id)
        self._fields = bound_log_fields(
            request_id=meta.request_id if meta else None,
            correlation_id=meta.correlation_id if meta else None,
            tenant=user.tenant_id,
            handler=qn,
        )

    def __enter__(self) -> telemetry.Span:
        span = self._span.__enter__()
        self._fields.__enter__()
        return span

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._fields.__exit__(kind, error, traceback)
        finally:
            self._span.__exit__(kind, error, traceback)


def note_entry(span: telemetry.Span, request: Request) -> None:
    """The entry handler of ``request`` and the risk it resolved to, on ``span``."""
    entry = request.entry
    span.set("entry.handler", entry.qn if entry else None)
    span.set("entry.risk", entry.risk if entry else None)
