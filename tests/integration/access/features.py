"""Entities whose rows belong to their creators, and a field only HR reads and writes."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, fields
from asanoha.platform.model import SessionUser

TENANT = "tenant-a"
ALICE = SessionUser.of("alice", TENANT, ["Staff"])
BOB = SessionUser.of("bob", TENANT, ["Staff"])
AUDITOR = SessionUser.of("auditor", TENANT, ["Staff", "Auditor"])
HR = SessionUser.of("hr", TENANT, ["Staff", "HR"])

OWN_ROWS = Access(roles=["Staff"], owner="created_by", bypass_roles=["Auditor", "HR"])
HR_ONLY = Access(roles=["HR"])

note = Entity(
    table="owned_notes",
    soft_delete=True,
    fields={
        "title": fields.text(
            personal=False, reason="test", sortable=True, filterable=True, searchable=True
        ),
        "review": fields.long_text(personal=False, reason="test", searchable=True, read=HR_ONLY),
        "salary": fields.integer(read=HR_ONLY, write=HR_ONLY, sortable=True, filterable=True),
        "grade": fields.select(["a", "b"], default="a", write=HR_ONLY),
    },
)
#: Rows keyed by a text field that holds the owner's user id, and by a function.
ticket = Entity(
    table="owned_tickets",
    fields={
        "holder": fields.text(personal=False, reason="the owner's user id", filterable=True),
        "title": fields.text(personal=False, reason="test"),
    },
)
card = Entity(
    table="owned_cards",
    fields={
        "holder": fields.reference("owned:note", filterable=True),
        "title": fields.text(personal=False, reason="test"),
    },
)


def shared_with(row: Any, user: SessionUser) -> bool:
    """A row is the caller's when the caller's id is one of its words."""
    return user.id in str(row["title"]).split()


owned = Feature("owned")
owned.crud(
    "note",
    note,
    write=OWN_ROWS,
    read=OWN_ROWS,
    descriptions={"list": "Your notes.", "detail": "One of your notes."},
)
owned.crud(
    "ticket",
    ticket,
    write=Access(roles=["Staff"], owner="holder"),
    read=Access(roles=["Staff"], owner="holder"),
)
owned.crud(
    "card",
    card,
    write=Access(roles=["Staff"], owner="holder"),
    read=Access(roles=["Staff"], owner="holder"),
)
owned.crud(
    "memo",
    Entity(table="owned_memos", fields={"title": fields.text(personal=False, reason="test")}),
    write=Access(roles=["Staff"], owner=shared_with),
    read=Access(roles=["Staff"], owner=shared_with),
)

#: Instruction fields: an agent's update needs a human's approval, whose summary shows the
#: old text (only what the agent's principal may read, of a row it reaches).
brief = Entity(
    table="owned_briefs",
    fields={
        "body": fields.long_text(personal=False, reason="test", read_as_instruction=True),
        "secret": fields.long_text(
            personal=False, reason="test", read_as_instruction=True, read=HR_ONLY
        ),
    },
)
owned.crud(
    "brief",
    brief,
    write=Access(roles=["Staff"], owner="created_by"),
    read=Access(roles=["Staff"], owner="created_by"),
)

#: Changed by any Staff, read only by its creator: an approver who may change a row it may not
#: read is shown none of its text.
draft = Entity(
    table="owned_drafts",
    fields={
        "body": fields.long_text(personal=False, reason="test", read_as_instruction=True),
    },
)
owned.crud(
    "draft",
    draft,
    write=Access(roles=["Staff"]),
    read=Access(roles=["Staff"], owner="created_by"),
)


class Rename(BaseModel):
    id: uuid.UUID
    title: str


@owned.write_handler("rename-note", access=Access(roles=["Staff"]))
def rename_note(payload: Rename, ctx: Any) -> Any:
    """A custom handler: it reaches the rows through ctx.entity, under the same rule."""
    return ctx.entity("note").update(
        payload.id, {"title": payload.title}, skip_optimistic_lock=True
    )


class Look(BaseModel):
    id: uuid.UUID


@owned.query_handler("peek-note", access=Access(roles=["Staff"]))
def peek_note(payload: Look, ctx: Any) -> Any:
    """A custom query that reads one note by id."""
    return ctx.entity("note").detail(payload.id)


note_flagged = owned.event("note-flagged")


@owned.write_handler("flag-note", access=Access(roles=["Staff"]))
def flag_note(payload: Look, ctx: Any) -> Any:
    """A domain event on the note's stream: the owner rule holds for it too."""
    return ctx.append_event(note_flagged, {"flag": True}, stream_id=payload.id).version


@owned.write_handler("touch-note", access=Access(roles=["Staff"]))
def touch_note(payload: Look, ctx: Any) -> Any:
    """A write whose result (the row as the caller sees it) its job gets as trigger.result."""
    return ctx.entity("note").get(payload.id)


#: What the job saw as ``ctx.trigger.result``.
TRIGGER_RESULTS: list[Any] = []


@owned.job("after-touch", on="owned:write:touch-note")
def after_touch(payload: dict[str, Any], ctx: Any) -> None:
    TRIGGER_RESULTS.append(ctx.trigger.result)
