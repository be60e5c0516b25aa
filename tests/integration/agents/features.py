"""Fixture feature of the agent suite: prompts whose body an assistant reads as instructions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, SessionUser, WriteContext, fields
from asanoha.testing.users import TENANT_A

ADMIN = Access(roles=["Admin"])
READERS = Access(roles=["Admin", "User"])

#: The agent's principal: an admin of tenant A whose sessions are agents.
ASSISTANT = SessionUser.of("assistant-a", TENANT_A, ["Admin"])

prompt = Entity(
    table="assist_prompts",
    soft_delete=True,
    fields={
        "label": fields.text(required=True, personal=False, reason="fixture"),
        "body": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)
assist = Feature("assist")
assist.crud(
    "prompt",
    prompt,
    write=ADMIN,
    read=READERS,
    descriptions={
        "create": "Create a prompt.",
        "update": "Change a prompt.",
        "list": "List prompts.",
        "detail": "One prompt.",
    },
)


class Relabel(BaseModel):
    id: str
    version: int
    label: str
    body: str | None = None


@assist.write_handler("relabel", access=ADMIN, description="Rename a prompt.")
def relabel(payload: Relabel, ctx: WriteContext) -> Any:
    """A mid-risk tool that delegates to the high-risk update: the gate still sees 'mid'."""
    changes = payload.model_dump(include={"label", "body"}, exclude_none=True)
    return ctx.write(
        "assist:write:prompt:update",
        {"id": payload.id, "version": payload.version, "changes": changes},
    )


class Nothing(BaseModel):
    pass


@assist.write_handler("internal-reindex", access=ADMIN)
def internal_reindex(payload: Nothing, ctx: WriteContext) -> None:
    # No description: agents never see it.
    return None
