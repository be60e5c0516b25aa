"""Provenance of ``read_as_instruction`` fields: who wrote each one, and whether an agent may
read it as instructions.

Every successful write of a flagged field appends a record in the write's transaction (the
entity executor is the only writer of entity rows). A field is *trusted* only when its last
write came from a human, or from a high-risk entry handler under a human's approval; anything
else (an agent without approval, a job, a consumer, a row with no record) is *untrusted*, so a
harness can treat the text as data. A job or consumer acting in a chain an agent began writes
on that agent's behalf: the record names the agent, whoever the job writes as.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Collection, Mapping
from typing import Any, Literal

from sqlalchemy import Connection, func, insert, select

from asanoha.platform.model import EntityDef, SessionUser, instruction_fields
from asanoha.platform.model.users import ANONYMOUS_USER_ID
from asanoha.platform.service.canonical import canonical_json
from asanoha.platform.service.request import Request, principal_kind
from asanoha.platform.store import StoredEvent, Tables

Trust = Literal["trusted", "untrusted"]
WriterKind = Literal["human", "agent", "system"]


def writer_kind(request: Request | None, user: SessionUser) -> WriterKind:
    """An agent if the outermost caller, the writer, or the principal who began the chain is
    one; the system user, anonymous callers and units of work without a caller are
    ``system``; everyone else is human."""
    if accountable_agent(request, user) is not None:
        return "agent"
    if principal_kind(user) != "human" or user.id == ANONYMOUS_USER_ID:
        return "system"
    return "human"


def accountable_agent(request: Request | None, user: SessionUser) -> tuple[str, str | None] | None:
    """``(principal id, agent run)`` of the agent who answers for a write, else ``None``.

    In a job or consumer of a chain an agent began, that agent: whoever the job writes as
    (``JobContext.write_as`` with a person's identity included), the text came from a chain
    the agent started, so it is never recorded as a person's.
    """
    if user.is_agent:
        return user.id, user.agent
    if request is None:
        return None
    if request.user.is_agent:
        return request.user.id, request.user.agent
    origin = request.origin
    if origin.principal_kind == "agent":
        return origin.principal or "agent", origin.agent_run
    return None


def record_instruction_write(
    conn: Connection,
    tables: Tables,
    request: Request | None,
    user: SessionUser,
    entity_def: EntityDef,
    event: StoredEvent,
) -> None:
    """Append one provenance record per flagged field the entity event ``event`` wrote."""
    flagged = instruction_fields(entity_def.entity)
    if not flagged:
        return
    written = event.payload.get("data") or event.payload.get("changes")
    if not isinstance(written, Mapping):
        return
    fields = sorted(flagged & set(written))
    if not fields:
        return
    kind = writer_kind(request, user)
    agent = accountable_agent(request, user)
    writer, agent_run = agent if agent is not None else (user.id, None)
    entry = request.entry if request is not None else None
    now = dt.datetime.now(dt.UTC)
    conn.execute(
        insert(tables.instruction_provenance),
        [
            {
                "tenant_id": event.tenant_id,
                "entity": entity_def.key,
                "row_id": event.stream_id,
                "field": name,
                "writer": writer,
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
    entity: str,
    fields_by_row: Mapping[str, Collection[str]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{row id: {field: {"trust", "entity", "writer_kind", "approval_id"}}}`` for the given
    flagged fields of rows of ``entity`` (``feature:name``).

    Each row and field is labelled on its own, by its last write; a field with no record
    (written before provenance was kept) is untrusted.
    """
    labels: dict[str, dict[str, dict[str, Any]]] = {
        str(row_id): {
            name: {"trust": "untrusted", "entity": entity, "writer_kind": None}
            for name in sorted(fields)
        }
        for row_id, fields in fields_by_row.items()
    }
    if not labels:
        return labels
    table = tables.instruction_provenance
    latest = (
        select(func.max(table.c.id))
        .where(
            table.c.tenant_id == tenant_id,
            table.c.entity == entity,
            table.c.row_id.in_(list(labels)),
        )
        .group_by(table.c.row_id, table.c.field)
    )
    rows = conn.execute(select(table).where(table.c.id.in_(latest))).mappings()
    for row in rows:
        wanted = labels[row["row_id"]]
        if row["field"] not in wanted:
            continue
        trusted = is_trusted(row["writer_kind"], row["entry_risk"], row["approval_id"])
        wanted[row["field"]] = {
            "trust": "trusted" if trusted else "untrusted",
            "entity": entity,
            "writer_kind": row["writer_kind"],
            "approval_id": str(row["approval_id"]) if row["approval_id"] else None,
        }
    return labels


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
