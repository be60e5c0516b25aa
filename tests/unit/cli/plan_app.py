"""A small application for ``asanoha explain <qn>``: what its write plans show."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, App, Entity, Feature, RateLimit, WriteContext, fields
from asanoha.platform.settings import Settings

ADMIN = Access(roles=["Admin"])

ticket = Entity(
    table="plan_tickets",
    fields={
        "title": fields.text(required=True, personal=False, reason="a subject line"),
        "email": fields.text(personal="self", filterable=True),
        "brief": fields.long_text(personal=False, reason="a brief", read_as_instruction=True),
    },
)

desk = Feature("desk")
desk.crud("ticket", ticket, write=ADMIN, read=ADMIN)


class Note(BaseModel):
    text: str


@desk.write_handler(
    "note",
    access=ADMIN,
    agent=Agent(risk="high"),
    description="Leave a note.",
    rate_limit=RateLimit("5/minute"),
)
def note(payload: Note, ctx: WriteContext) -> dict[str, Any]:
    return {"text": payload.text}


@desk.job("noted", on="desk:write:note")
def noted(payload: dict[str, Any], ctx: Any) -> None:
    """Follows every note."""


# Redis is named, never reached: explaining a plan counts no call.
SETTINGS = Settings(
    database_url="sqlite+pysqlite:///:memory:", rate_limit_url="redis://127.0.0.1:6379/0"
)
app = App([desk], SETTINGS)
