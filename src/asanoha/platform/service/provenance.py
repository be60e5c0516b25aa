"""Provenance of ``read_as_instruction`` fields: who wrote each one, and whether an agent may
read it as instructions.

Every successful write of a flagged field appends a record in the write's transaction (the
entity executor is the only writer of entity rows). A field is *trusted* only when its last
write came from a human, or from a high-risk entry handler under a human's approval; anything
else (an agent without approval, a job, a consumer, a row with no record) is *untrusted*, so a
harness can treat the text as data.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from sqlalchemy import Connection, func, insert, select

from asanoha.platform.model import EntityDef, SessionUser, instruction_fields
from asanoha.platform.model.users import ANONYMOUS_USER_ID, SYSTEM_ROLE
from asanoha.platform.service.approvals import canonical_json
from asanoha.platform.service.request import Request
from asanoha.platform.store import StoredEvent, Tables

Trust = Literal["trusted", "untrusted"]
WriterKind = Literal["human", "agent", "system"]


def writer_kind(request: Request | None, user: SessionUser) -> WriterKind:
    """An agent if the outermost caller or the writer is one; the system user, anonymous
    callers and units of work without a caller are ``system``; everyone else is human."""
    if user.is_agent or (request is not None and request.user.is_agent):
        return "agent"
    if SYSTEM_ROLE in user.roles or user.is_anonymous or user.id == ANONYMOUS_USER_ID:
        return "system"
    return "human"


def record_instruction_write(
    conn: Connection,
    tables: Tables,
    request: Request | None,
    user: SessionUser,
    entity_def: EntityDef,
    event: StoredEvent,
) -> None:
    """Append one provenance record per flagged field the entity event ``event`` wrote."""
    written = event.payload.get("data") or event.payload.get("changes")
    if not isinstance(written, Mapping):
        return
    fields = sorted(instruction_fields(entity_def.entity) & set(written))
    if not fields:
        return
    kind = writer_kind(request, user)
    entry = request.entry if request is not None else None
    agent_run = request.user.agent if request is not None and request.user.is_agent else user.agent
    now = dt.datetime.now(dt.UTC)
    conn.execute(
        insert(tables.instruction_provenance),
        [
            {
                "tenant_id": event.tenant_id,
                "entity": entity_def.key,
                "row_id": event.stream_id,
                "field": name,
                "writer": user.id,
                "writer_kind": kind,
                "agent_run": agent_run,
                "entry_qn": entry.qn if entry else None,
                "entry_risk": entry.risk if entry else None,
                "approval_id": request.approval_id if request is not None else None,
                "payload_digest": _digest(written[name]),
                "created_at": now,
            }
            for name in fields
        ],
    )


def is_trusted(kind: str, entry_risk: str | None, approval_id: uuid.UUID | None) -> bool:
    """The trust rule: a human wrote it, or a high-risk entry ran under a human's approval."""
    return kind == "human" or (entry_risk == "high" and approval_id is not None)


def trust_labels(
    conn: Connection,
    tables: Tables,
    tenant_id: str,
    entity_def: EntityDef,
    row_ids: Iterable[str],
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{row id: {field: {"trust", "writer_kind", "approval_id"}}}`` for every flagged field.

    A field with no record (written before provenance, or never) is untrusted.
    """
    ids = [str(row_id) for row_id in row_ids]
    flagged = sorted(instruction_fields(entity_def.entity))
    labels: dict[str, dict[str, dict[str, Any]]] = {
        row_id: {name: {"trust": "untrusted", "writer_kind": None} for name in flagged}
        for row_id in ids
    }
    if not ids or not flagged:
        return labels
    table = tables.instruction_provenance
    latest = (
        select(func.max(table.c.id))
        .where(
            table.c.tenant_id == tenant_id,
            table.c.entity == entity_def.key,
            table.c.row_id.in_(ids),
        )
        .group_by(table.c.row_id, table.c.field)
    )
    rows = conn.execute(select(table).where(table.c.id.in_(latest))).mappings()
    for row in rows:
        trusted = is_trusted(row["writer_kind"], row["entry_risk"], row["approval_id"])
        labels[row["row_id"]][row["field"]] = {
            "trust": "trusted" if trusted else "untrusted",
            "writer_kind": row["writer_kind"],
            "approval_id": str(row["approval_id"]) if row["approval_id"] else None,
        }
    return labels


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
