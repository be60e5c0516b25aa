"""Admission: the first steps of every dispatch, a write's or a query's, before any
transaction: the handler exists (404), its access rule admits the caller (403), the payload
is storable and valid (413, 400); then, for a top-level call of a rate-limited handler, the
rate limit (429). And the request a top-level dispatch opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic
from sqlalchemy import Connection

from asanoha.platform.errors import AccessDeniedError, NotFoundError, Reasons
from asanoha.platform.model import Access, HandlerDef, Registry, SessionUser
from asanoha.platform.model.scopes import grants_call, scopes_admit
from asanoha.platform.service.feature_settings import FeatureSettings
from asanoha.platform.service.rate_limits import RateLimiter
from asanoha.platform.service.request import (
    EntryHandler,
    Request,
    RequestKind,
    RequestMeta,
    WriteOrigin,
)
from asanoha.platform.service.validation import check_storable, validate_payload


class Admission:
    """Admits calls to the handlers of one registry."""

    def __init__(
        self,
        registry: Registry,
        rate_limiter: RateLimiter | None,
        switches: FeatureSettings | None = None,
    ) -> None:
        self._registry = registry
        #: Whether a toggleable feature is on in the caller's tenant (``feature_settings``).
        self._switches = switches
        #: Counts the calls of handlers that declare ``rate_limit=`` (Redis).
        self.rate_limiter = rate_limiter

    def answering_once(self, qns: Sequence[str]) -> HandlerDef | None:
        """The first of ``qns`` whose handler's answer is never kept (``answer_once``), if
        any: a batch holding it cannot be sent with an idempotency key."""
        for qn in qns:
            handler = self._registry.find_handler(qn)
            if handler is not None and handler.answer_once is not None:
                return handler
        return None

    def admit(
        self,
        qn: str,
        kind: str,
        payload: Any,
        user: SessionUser,
        conn: Connection | None = None,
        *,
        nested: bool = False,
    ) -> tuple[HandlerDef, pydantic.BaseModel]:
        """The handler exists, admits ``user``, its feature is on in the user's tenant (403
        ``feature_disabled``; ``conn``: the caller's open transaction, if any) and it
        accepts ``payload``: it and the payload.

        A caller with a scoped token (``user.scopes``) reaches only handlers its scopes
        match; a ``nested`` call (a handler's own ``ctx.write``/``ctx.query``) is the
        handler's doing, admitted by the scopes of the call that entered it.
        """
        handler = self._registry.find_handler(qn)
        if handler is None or handler.kind != kind:
            raise NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=qn)
        check_caller(user, handler.qn, handler.access, nested=nested)
        if self._switches is not None:
            self._switches.check_enabled(handler, user.tenant_id, conn)
        check_storable(payload, handler.qn)
        return handler, validate_payload(handler.payload_model, payload, handler.qn)

    def check_rate(self, handler: HandlerDef, user: SessionUser, meta: RequestMeta | None) -> None:
        """Count a top-level call of a rate-limited handler (see ``rate_limits``)."""
        if self.rate_limiter is None:
            if handler.rate_limit is None:
                return
            # App refuses to start this way; a bare Service must be given a limiter.
            raise RuntimeError(
                f"{handler.qn} declares rate_limit= but the service has no rate limiter; "
                "set ASANOHA_RATE_LIMIT_URL (or a redis:// ASANOHA_BROKER_URL)"
            )
        # The limiter knows the application's default for handlers that declare none.
        self.rate_limiter.check(handler, user, meta)


def check_caller(user: SessionUser, qn: str, access: Access, *, nested: bool = False) -> None:
    """Refuse ``user`` a call of the handler ``qn`` whose rule is ``access``: 403
    ``token_scope_denied`` outside a scoped token's scopes (whatever its roles; a ``nested``
    call is admitted by the scopes of the call that entered it), else ``role_required``."""
    if user.scopes is not None and not nested and not scopes_admit(user.scopes, qn):
        raise AccessDeniedError(Reasons.TOKEN_SCOPE_DENIED, handler=qn, scopes=sorted(user.scopes))
    if not grants_call(user, qn, access):
        raise AccessDeniedError(Reasons.ROLE_REQUIRED, handler=qn, roles=access.describe())


def open_request(
    conn: Connection,
    kind: RequestKind,
    handler: HandlerDef,
    user: SessionUser,
    meta: RequestMeta | None,
    origin: WriteOrigin | None,
    entry: EntryHandler,
) -> Request:
    """The request of a top-level dispatch: ``handler`` is its entry handler, ``origin`` the
    chain it continues (``None``: it begins one)."""
    meta = meta or RequestMeta()
    request = Request(
        conn=conn,
        user=user,
        kind=kind,
        entry=entry,
        origin=origin or WriteOrigin.of_call(handler.qn, user, handler.access, entry.risk),
        meta=meta,
    )
    if meta.request_id:
        request.request_id = meta.request_id
    return request
