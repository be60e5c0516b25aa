"""Fixture features of the live feed suite: tickets anyone of the tenant's staff reads (with
a field only admins read, and the contact's e-mail as personal data), notes each user reads
only when they wrote them, and audit rows only admins read."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, StreamContext, WriteContext, fields

ADMIN = Access(roles=["Admin"])
STAFF = Access(roles=["Admin", "User"])

ticket = Entity(
    table="feed_tickets",
    fields={
        "title": fields.text(required=True, personal=False, reason="a subject line"),
        "email": fields.text(personal="self"),
        "cost": fields.integer(read=ADMIN),
        "body": fields.long_text(personal=False, reason="fixture text"),
    },
)
note = Entity(
    table="feed_notes",
    fields={"text": fields.text(personal=False, reason="fixture text")},
)
audit = Entity(
    table="feed_audits",
    fields={"what": fields.text(personal=False, reason="fixture text")},
)

crm = Feature("crm")
crm.crud("ticket", ticket, write=STAFF, read=STAFF)
crm.crud(
    "note",
    note,
    write=Access(roles=["Admin", "User"], owner="created_by", bypass_roles=["Admin"]),
    read=Access(roles=["Admin", "User"], owner="created_by", bypass_roles=["Admin"]),
)
crm.crud("audit", audit, write=ADMIN, read=ADMIN)


@crm.stream_handler("board", access=STAFF, on=["crm:event:ticket.*"])
def board(event: dict[str, Any], ctx: StreamContext) -> dict[str, Any] | None:
    """Ticket titles as a board shows them (the cost only for those who may read it)."""
    payload = event["payload"]
    values = payload.get("data") or payload.get("changes") or {}
    if "title" not in values:
        return None
    return {"ticket": event["streamId"], "title": values["title"], "cost": values.get("cost")}


@crm.stream_handler("audit-trail", access=ADMIN, on=["crm:event:audit.*"])
def audit_trail(event: dict[str, Any], ctx: StreamContext) -> dict[str, Any]:
    return {"audit": event["streamId"]}


class RowId(BaseModel):
    id: uuid.UUID


@crm.write_handler("forget-ticket", access=ADMIN, agent=Agent(risk="high"))
def forget_ticket(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("ticket").forget(payload.id)


reports = Feature("reports")


@reports.job("summarize", on="crm:write:ticket:create")
def summarize(payload: dict[str, Any], ctx: Any) -> None:
    """Reports its progress twice."""
    ctx.progress(0.5, "half way")
    ctx.progress(1.0)
