"""Approval tokens: a human's consent to exactly one high-risk call by an agent principal.

A token is ``<approval id>.<expiry>.<mac>``; the mac is an HMAC over the handler QN, the
tenant, the calling principal, the canonical JSON of the validated payload, the id and
version of every row the payload names (its ``id``, or the fields ``Agent(targets=...)``
declares, for any handler, standard or custom) and the expiry. At the call the server
recomputes it from what is actually being called, so editing any argument, calling another
handler, a row changed since the approval or another principal invalidates the token. Its
row records who approved, through which channel, for which agent run and tool call, and the
first use: a replay answers 409. The approver is never the principal the call is for.

This module signs and checks tokens, mints them for an approver and requires them of an agent
principal's call (its first use recorded in the call's transaction); what the call is, as a
human sees it and the mac binds it, is ``call_description``'s.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import uuid
from dataclasses import dataclass
from typing import Any

import pydantic
from sqlalchemy import Connection, insert, select, update

from asanoha.platform import base64url
from asanoha.platform.errors import (
    AccessDeniedError,
    ConflictError,
    NotFoundError,
    Reasons,
    UnprocessableError,
)
from asanoha.platform.model import HandlerDef, Registry, SessionUser
from asanoha.platform.model.agent_hints import derive_tool_hints
from asanoha.platform.service.call_description import CallDescription, describe_call
from asanoha.platform.service.canonical import canonical_json
from asanoha.platform.service.validation import validate_payload
from asanoha.platform.store import Tables

#: Longest lifetime of an approval token, in seconds.
MAX_APPROVAL_TTL = 3600


class ApprovalSigner:
    """Mints and checks the HMAC of approval tokens with one server key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("an approval key needs at least 16 bytes")
        self._key = key

    def mac(self, approval_id: uuid.UUID, call: CallDescription, expires: int) -> str:
        """The HMAC binding ``approval_id`` to exactly ``call`` until ``expires``."""
        message = canonical_json(
            {
                "approval": str(approval_id),
                "handler": call.handler.qn,
                "tenant": call.tenant_id,
                "principal": call.principal,
                "payload": call.payload_digest,
                "targets": [target.to_json() for target in call.targets],
                "expires": expires,
            }
        )
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64url.encode(digest)

    def token(self, approval_id: uuid.UUID, call: CallDescription, expires: int) -> str:
        """The token handed to the approver, to pass on to the agent's harness."""
        return f"{approval_id}.{expires}.{self.mac(approval_id, call, expires)}"

    def check(self, token: str, call: CallDescription, now: float) -> uuid.UUID:
        """The approval id of ``token`` if it was minted for exactly ``call`` and is current."""
        try:
            raw_id, raw_expires, mac = token.split(".")
            approval_id, expires = uuid.UUID(raw_id), int(raw_expires)
        except ValueError:
            raise AccessDeniedError(
                Reasons.AGENT_APPROVAL_INVALID, handler=call.handler.qn
            ) from None
        if not hmac.compare_digest(mac, self.mac(approval_id, call, expires)):
            raise AccessDeniedError(Reasons.AGENT_APPROVAL_INVALID, handler=call.handler.qn)
        if now >= expires:
            raise AccessDeniedError(
                Reasons.AGENT_APPROVAL_EXPIRED,
                handler=call.handler.qn,
                expires_at=dt.datetime.fromtimestamp(expires, dt.UTC).isoformat(),
            )
        return approval_id


def needs_approval(handler: HandlerDef, user: SessionUser) -> bool:
    """A write that resolves ``high``, called directly by an agent principal."""
    return user.is_agent and derive_tool_hints(handler).approval_required


def require_approval(
    conn: Connection,
    signer: ApprovalSigner,
    registry: Registry,
    tables: Tables,
    handler: HandlerDef,
    model: pydantic.BaseModel,
    user: SessionUser,
    token: str | None,
    request_id: str,
) -> uuid.UUID | None:
    """The admission step for agent principals: the approval id the call runs under.

    ``None`` when the call needs no approval. Without a token: 403 ``agent.approval_required``
    carrying what a human must see. A token for anything else: 403 ``agent.approval_invalid``;
    an expired one 403 ``agent.approval_expired``; a used one 409 ``agent.approval_used``. The
    first use is recorded in the caller's transaction, so a call that fails later leaves the
    token unused.
    """
    if not needs_approval(handler, user):
        return None
    call = describe_call(conn, registry, tables, handler, model, user, seen_by=user)
    if token is None:
        raise AccessDeniedError(Reasons.AGENT_APPROVAL_REQUIRED, **call.details())
    now = dt.datetime.now(dt.UTC)
    approval_id = signer.check(token, call, now.timestamp())
    approvals = tables.agent_approvals
    # Read (and lock) before writing, so a replay is refused without sending any write; a
    # concurrent use of the same token waits here and then sees it used.
    recorded = conn.execute(
        select(approvals.c.used_at, approvals.c.approved_by)
        .where(approvals.c.id == approval_id, approvals.c.tenant_id == user.tenant_id)
        .with_for_update()
    ).first()
    if recorded is None:
        raise AccessDeniedError(Reasons.AGENT_APPROVAL_INVALID, handler=handler.qn)
    if recorded.approved_by == user.id:
        raise AccessDeniedError(
            Reasons.AGENT_APPROVER_IS_AGENT,
            handler=handler.qn,
            agent=user.agent,
            principal=user.id,
        )
    if recorded.used_at is not None:
        raise ConflictError(
            Reasons.AGENT_APPROVAL_USED, handler=handler.qn, approval_id=str(approval_id)
        )
    conn.execute(
        update(approvals)
        .where(approvals.c.id == approval_id)
        .values(used_at=now, used_by_request=request_id)
    )
    return approval_id


@dataclass(frozen=True)
class ApprovalRequest:
    """What a human approves: a call of ``handler`` with ``payload`` by ``principal``."""

    handler: str
    payload: dict[str, Any]
    principal: str
    channel: str
    agent_run: str | None = None
    tool_call: str | None = None
    ttl_seconds: int = 600
    always: bool = False


def mint_approval(
    conn: Connection,
    signer: ApprovalSigner,
    registry: Registry,
    tables: Tables,
    approver: SessionUser,
    asked: ApprovalRequest,
) -> dict[str, Any]:
    """Record ``approver``'s consent and return the token for exactly the asked call.

    The approver must be a human whom the target handler admits; the payload is validated
    with the handler's model, so the digest is the one the call will have. What is checked
    and shown is decided by the approver's own access: a confined approver's approval of a
    standard change of a row it does not own answers 404 ``entity_not_found``, as its own
    call would (a refusal saying "not yours" would tell that the row exists), and the
    summary shows the old text only of a row and fields the approver reads. The named
    principal only binds the token; its own access is checked when it makes the call.
    """
    handler = registry.find_handler(asked.handler)
    if handler is None or handler.kind != "write":
        raise NotFoundError(Reasons.HANDLER_NOT_FOUND, handler=asked.handler)
    hints = derive_tool_hints(handler)
    # An agent principal never approves, and nobody approves a call made as themselves:
    # a token without an ``agent`` claim for the agent's own principal is still the agent.
    if approver.is_agent or approver.id == asked.principal:
        raise AccessDeniedError(
            Reasons.AGENT_APPROVER_IS_AGENT,
            handler=handler.qn,
            agent=approver.agent,
            principal=asked.principal,
        )
    if asked.always and hints.approval_required:
        raise AccessDeniedError(
            Reasons.AGENT_HIGH_RISK_NO_ALWAYS, handler=handler.qn, resolved_risk=hints.risk
        )
    if not hints.approval_required:
        raise UnprocessableError(
            Reasons.AGENT_APPROVAL_NOT_NEEDED, handler=handler.qn, resolved_risk=hints.risk
        )
    if not handler.access.admits(approver):
        raise AccessDeniedError(
            Reasons.ROLE_REQUIRED, handler=handler.qn, roles=handler.access.describe()
        )
    model = validate_payload(handler.payload_model, asked.payload, handler.qn)
    principal = SessionUser.of(asked.principal, approver.tenant_id).as_agent(
        asked.agent_run or "agent"
    )
    call = describe_call(conn, registry, tables, handler, model, principal, seen_by=approver)
    now = dt.datetime.now(dt.UTC)
    ttl = max(1, min(asked.ttl_seconds, MAX_APPROVAL_TTL))
    expires = int(now.timestamp()) + ttl
    approval_id = uuid.uuid4()
    conn.execute(
        insert(tables.agent_approvals).values(
            id=approval_id,
            tenant_id=approver.tenant_id,
            handler_qn=handler.qn,
            principal=asked.principal,
            payload_digest=call.payload_digest,
            target_id=call.target.id,
            target_version=call.target.version,
            summary=call.stored_summary,
            approved_by=approver.id,
            channel=asked.channel,
            agent_run=asked.agent_run,
            tool_call=asked.tool_call,
            created_at=now,
            expires_at=dt.datetime.fromtimestamp(expires, dt.UTC),
        )
    )
    return {
        "approval_id": str(approval_id),
        "token": signer.token(approval_id, call, expires),
        "expires_at": dt.datetime.fromtimestamp(expires, dt.UTC).isoformat(),
        "handler": handler.qn,
        "payload_digest": call.payload_digest,
        "summary": call.summary,
    }


class Approvals:
    """The approval desk of one service: its signer, registry and tables."""

    def __init__(self, signer: ApprovalSigner, registry: Registry, tables: Tables) -> None:
        self.signer = signer
        self._registry = registry
        self._tables = tables

    def require(
        self,
        conn: Connection,
        handler: HandlerDef,
        model: pydantic.BaseModel,
        user: SessionUser,
        token: str | None,
        request_id: str,
    ) -> uuid.UUID | None:
        """See ``require_approval``."""
        return require_approval(
            conn, self.signer, self._registry, self._tables, handler, model, user, token, request_id
        )

    def mint(
        self, conn: Connection, approver: SessionUser, asked: ApprovalRequest
    ) -> dict[str, Any]:
        """See ``mint_approval``."""
        return mint_approval(conn, self.signer, self._registry, self._tables, approver, asked)


def approval_key(secret: str) -> bytes:
    """The approval HMAC key derived from ``secret``: ``ASANOHA_APPROVAL_SECRET``, or the token
    secret (a separate key per purpose); see ``Settings.approval_signing_secret``."""
    return hmac.new(secret.encode(), b"asanoha approval tokens v1", hashlib.sha256).digest()


def record_step_approval(
    conn: Connection,
    tables: Tables,
    approver: SessionUser,
    *,
    step_qn: str,
    run_id: uuid.UUID,
    principal: str,
    payload: Any,
    channel: str,
) -> uuid.UUID:
    """Record ``approver``'s approval of the approval step ``step_qn`` of the run
    ``run_id``, used at once: an approval row like a token's, bound to the run (its target)
    and the digest of its payload, for the principal that started the run. Its id."""
    now = dt.datetime.now(dt.UTC)
    approval_id = uuid.uuid4()
    conn.execute(
        insert(tables.agent_approvals).values(
            id=approval_id,
            tenant_id=approver.tenant_id,
            handler_qn=step_qn,
            principal=principal,
            payload_digest=hashlib.sha256(canonical_json(payload).encode()).hexdigest(),
            target_id=str(run_id),
            summary=f"approve step {step_qn} of run {run_id}",
            approved_by=approver.id,
            channel=channel,
            created_at=now,
            expires_at=now,
            used_at=now,
            used_by_request=str(run_id),
        )
    )
    return approval_id
