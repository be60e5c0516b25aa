"""What an event records about its writer: who, through which handler, for which request.

One function, used by every append (the entity executor's and a handler's domain events), so
that a consumer or an audit reads the same fields whatever wrote the event.
"""

from __future__ import annotations

from typing import Any

from asanoha.platform import telemetry
from asanoha.platform.model import SessionUser
from asanoha.platform.service.request import Request, RequestMeta


def event_metadata(request: Request | None, user: SessionUser, handler_qn: str) -> dict[str, Any]:
    """The ``metadata`` of an event ``user`` writes through ``handler_qn`` in ``request``."""
    meta = request.meta if request else RequestMeta()
    return {
        "user_id": user.id,
        "tenant_id": user.tenant_id,
        "handler": handler_qn,
        "entry_handler": request.entry.qn if request and request.entry else None,
        "origin": request.origin.to_header() if request else None,
        "request_id": meta.request_id or (request.request_id if request else None),
        "correlation_id": meta.correlation_id,
        "causation_id": meta.causation_id,
        # The trace of the write, which the consumers delivering the event join.
        **telemetry.trace_headers(),
    }
