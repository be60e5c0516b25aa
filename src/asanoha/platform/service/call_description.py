"""What a human is asked to approve: the description of one call of a handler by an agent
principal (``CallDescription``), made by ``describe_call``.

Every row the payload names (its ``id``, or the fields ``Agent(targets=...)`` declares, for
any handler, standard or custom) is bound at its stream's current version, an entity row
locked until the transaction ends: the row is what an approval protects, and its mac
(``approvals``) covers it. A standard create or update also shows the old and new text of
each instruction field it writes; a custom handler shows its payload. The rules of what is
shown live here: the ownership check and the old text are those of the viewer (the caller
asked for an approval, or the approver), never of the principal the call is for; the stored
summary shows ``[personal]`` for a personal value; a long text is shortened.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import pydantic
from sqlalchemy import Connection, select

from asanoha.platform.errors import NotFoundError, Reasons
from asanoha.platform.model import (
    Agent,
    EntityDef,
    HandlerDef,
    Registry,
    SessionUser,
    instruction_fields,
)
from asanoha.platform.personal.vault import reveal
from asanoha.platform.service import field_access, ownership
from asanoha.platform.service.canonical import canonical_json, payload_digest
from asanoha.platform.store import Tables, stream_version
from asanoha.platform.store.projections import lock_entity_row, stream_entity

#: What the stored summary of an approval shows for a personal value.
PERSONAL_SHOWN = "[personal]"
#: Longest text of one field value shown in a summary.
SUMMARY_TEXT_LIMIT = 2000
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


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SUMMARY_TEXT_LIMIT:
        return value[:SUMMARY_TEXT_LIMIT] + "…"
    return value
