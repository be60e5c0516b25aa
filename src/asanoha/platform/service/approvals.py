"""Approval tokens: a human's consent to exactly one high-risk call by an agent principal.

A token is ``<approval id>.<expiry>.<mac>``; the mac is an HMAC over the handler QN, the
tenant, the calling principal, the canonical JSON of the validated payload, the id and
version of every row the payload names (its ``id``, or the fields ``Agent(targets=...)``
declares, for any handler, standard or custom) and the expiry. At the call the server
recomputes it from what is actually being called, so editing any argument, calling another
handler, a row changed since the approval or another principal invalidates the token. Its
row records who approved, through which channel, for which agent run and tool call, and the
first use: a replay answers 409. The approver is never the principal the call is for.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, replace
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
from asanoha.platform.model import (
    Agent,
    EntityDef,
    HandlerDef,
    Registry,
    SessionUser,
    instruction_fields,
)
from asanoha.platform.model.agent_hints import derive_tool_hints
from asanoha.platform.personal.vault import reveal
from asanoha.platform.service import field_access, ownership
from asanoha.platform.service.validation import validate_payload
from asanoha.platform.store import Tables, stream_version
from asanoha.platform.store.projections import lock_entity_row, stream_entity

#: Longest lifetime of an approval token, in seconds.
MAX_APPROVAL_TTL = 3600
#: What the stored summary of an approval shows for a personal value.
PERSONAL_SHOWN = "[personal]"
#: Longest text of one field value shown in a summary.
SUMMARY_TEXT_LIMIT = 2000


def canonical_json(value: Any) -> str:
    """One spelling of a JSON value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_digest(model: pydantic.BaseModel) -> str:
    """SHA-256 of the canonical JSON of a validated payload (defaults included)."""
    return hashlib.sha256(canonical_json(model.model_dump(mode="json")).encode()).hexdigest()


#: The width of a stream id: a longer value cannot name a row.
MAX_STREAM_ID_LENGTH = 64


@dataclass(frozen=True)
class Target:
    """A row a call acts on, named by its payload: its id and its stream's current version
    (0: no such row yet)."""

    id: str | None = None
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON for details and the mac."""
        return {"id": self.id, "version": self.version}


@dataclass(frozen=True)
class FieldChange:
    """One instruction field a call would write: its text now and after the call."""

    entity: str
    field: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        """JSON for the approval-required result."""
        return {"entity": self.entity, "field": self.field, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class CallDescription:
    """What a human is asked to approve."""

    handler: HandlerDef
    principal: str
    tenant_id: str
    payload: dict[str, Any]
    payload_digest: str
    #: Every row the payload names, in the order of the target fields.
    targets: tuple[Target, ...]
    changes: tuple[FieldChange, ...]
    #: The personal fields of a standard handler's entity, or those a custom handler
    #: declares (``personal=``): kept out of the stored summary.
    personal: frozenset[str] = frozenset()

    @property
    def target(self) -> Target:
        """The first row the call acts on (``Target()``: it names none, a create)."""
        return self.targets[0] if self.targets else Target()

    @property
    def summary(self) -> str:
        """A human-readable sentence per change: handler, row, old and new instruction text."""
        rows = ", ".join(
            f"row {target.id}" + (f" (version {target.version})" if target.version else "")
            for target in self.targets
        )
        lines = [f"{self.principal} (agent) calls {self.handler.qn} on {rows or 'a new row'}."]
        if self.handler.description:
            lines.append(self.handler.description)
        for change in self.changes:
            lines.append(
                f"{change.entity}.{change.field} (read as instructions): "
                f"{_shorten(change.old)!r} -> {_shorten(change.new)!r}"
            )
        if not self.changes:
            lines.append(f"Payload: {_shorten(canonical_json(self.payload))}")
        return "\n".join(lines)

    @property
    def stored_summary(self) -> str:
        """The summary as the approvals table keeps it: personal values read ``[personal]``
        (the human asked saw them; the record of the approval does not hold them)."""
        if not self.personal:
            return self.summary

        def hide(values: dict[str, Any]) -> dict[str, Any]:
            return {
                key: PERSONAL_SHOWN if key in self.personal and value is not None else value
                for key, value in values.items()
            }

        payload = hide(self.payload)
        if isinstance(payload.get("changes"), dict):
            payload["changes"] = hide(payload["changes"])
        changes = tuple(
            replace(change, old=PERSONAL_SHOWN, new=PERSONAL_SHOWN)
            if change.field in self.personal
            else change
            for change in self.changes
        )
        return replace(self, payload=payload, changes=changes, personal=frozenset()).summary

    def details(self) -> dict[str, Any]:
        """The details of an approval-required error: what a client needs to ask a human."""
        return {
            "handler": self.handler.qn,
            "resolved_risk": "high",
            "payload_digest": self.payload_digest,
            "summary": self.summary,
            "changes": [change.to_json() for change in self.changes],
            "target": self.target.to_json(),
            "targets": [target.to_json() for target in self.targets],
            "approve_with": "agent:write:approve",
        }


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


def describe_call(
    conn: Connection,
    registry: Registry,
    tables: Tables,
    handler: HandlerDef,
    model: pydantic.BaseModel,
    user: SessionUser,
    *,
    seen_by: SessionUser,
) -> CallDescription:
    """What ``user`` calling ``handler`` with ``model`` would do, for a human to approve.

    Every row the payload names (see ``named_rows``) is bound at its stream's current
    version, whatever kind of handler names it: the row is what the approval protects. A
    standard create or update also shows the old and new text of each instruction field it
    carries; a custom handler shows the payload.

    ``seen_by`` is who reads the description: the caller itself when it is asked for an
    approval, the approver when a human approves. The ownership check and the old text shown
    are that viewer's, never those of the principal the call is for: an approver names the
    principal freely, so a description made as the principal would hand the approver the
    text of a row only the principal reaches.
    """
    payload = model.model_dump(mode="json")
    _check_owned(conn, registry, tables, handler, payload, seen_by)
    targets = tuple(
        bind_row(conn, registry, tables, user.tenant_id, row_id)
        for row_id in named_rows(handler, payload)
    )
    changes: list[FieldChange] = []
    personal = handler.personal_payload
    if handler.crud and handler.crud.verb in ("create", "update"):
        entity_def = registry.entity(f"{handler.feature}:{handler.crud.entity}")
        personal = entity_def.entity.personal_fields
        row = _read_row(conn, tables, entity_def.key, user.tenant_id, payload.get("id"))
        # The old text goes to the viewer: only of a row it reaches, only fields it reads.
        row = _as_seen_by(registry, entity_def, seen_by, row)
        written = payload.get("changes", {}) if handler.crud.verb == "update" else payload
        flagged = instruction_fields(entity_def.entity)
        for name in sorted(flagged & set(written or {})):
            old = row.get(name) if row is not None else None
            changes.append(FieldChange(entity_def.key, name, old, written[name]))
    return CallDescription(
        handler=handler,
        principal=user.id,
        tenant_id=user.tenant_id,
        payload=payload,
        payload_digest=payload_digest(model),
        targets=targets,
        changes=tuple(changes),
        personal=personal,
    )


def named_rows(handler: HandlerDef, payload: dict[str, Any]) -> list[str]:
    """The ids of the rows ``payload`` names: the values of the handler's target fields
    (``Agent(targets=...)``, else ``id``), a string or a list of them each, first seen first."""
    fields = (handler.agent or Agent()).target_fields
    found: list[str] = []
    for name in fields:
        value = payload.get(name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str | int) and not isinstance(item, bool):
                row_id = str(item)
                if 0 < len(row_id) <= MAX_STREAM_ID_LENGTH and row_id not in found:
                    found.append(row_id)
    return found


def bind_row(
    conn: Connection, registry: Registry, tables: Tables, tenant_id: str, row_id: str
) -> Target:
    """``row_id`` at its current version; an entity row is locked until the transaction
    ends, so at the call nobody changes it between this check and the handler's write."""
    entity_def = stream_entity(conn, tables, registry, tenant_id, row_id)
    locked = lock_entity_row(conn, tables, entity_def, tenant_id, row_id) if entity_def else None
    version = locked if locked is not None else stream_version(conn, tables, tenant_id, row_id)
    return Target(row_id, version)


def _read_row(
    conn: Connection, tables: Tables, entity: str, tenant_id: str, raw_id: Any
) -> dict[str, Any] | None:
    if raw_id is None:
        return None
    try:
        row_id = uuid.UUID(str(raw_id))
    except ValueError:
        return None
    table = tables.entity(entity)
    found = (
        conn.execute(select(table).where(table.c.id == row_id, table.c.tenant_id == tenant_id))
        .mappings()
        .first()
    )
    # Its personal values opened: the summary shows the text a human can read.
    return reveal(conn, dict(found)) if found is not None else None


def _check_owned(
    conn: Connection,
    registry: Registry,
    tables: Tables,
    handler: HandlerDef,
    payload: dict[str, Any],
    user: SessionUser,
) -> None:
    """A confined caller's standard change of a row it does not own answers as the executor
    would, 404 as for a missing row, before a summary could tell that the row exists."""
    if handler.crud is None or handler.crud.verb not in ("update", "delete", "restore"):
        return
    entity_def = registry.entity(f"{handler.feature}:{handler.crud.entity}")
    rule = ownership.declared_rule(registry, entity_def, "write")
    if rule is None or not rule.confines(user):
        return
    row = _read_row(conn, tables, entity_def.key, user.tenant_id, payload.get("id"))
    if row is None or not ownership.owned(rule, row, user):
        raise NotFoundError(
            Reasons.ENTITY_NOT_FOUND, entity=entity_def.key, id=str(payload.get("id"))
        )


def _as_seen_by(
    registry: Registry, entity_def: EntityDef, user: SessionUser, row: dict[str, Any] | None
) -> dict[str, Any] | None:
    if row is None:
        return None
    # Shown only to a viewer who may both change the row and read it (the entity's write and
    # read rules can differ): what the viewer's own detail query would not show stays hidden.
    reaches: tuple[ownership.Reach, ...] = ("write", "read")
    for reach in reaches:
        rule = ownership.declared_rule(registry, entity_def, reach)
        if rule is not None and rule.confines(user) and not ownership.owned(rule, row, user):
            return None
    return field_access.without_hidden(row, field_access.hidden_fields(entity_def, user))


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


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SUMMARY_TEXT_LIMIT:
        return value[:SUMMARY_TEXT_LIMIT] + "…"
    return value
