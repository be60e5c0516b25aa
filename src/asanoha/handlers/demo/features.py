"""The ``notes`` feature: a note entity, a gated custom write, a job with a retry, and a
workflow that fans out over the notes and in again."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from asanoha import (
    Access,
    Agent,
    Backoff,
    Entity,
    Feature,
    JobContext,
    StepContext,
    WriteContext,
    fields,
)

EDITORS = Access(roles=["Editor", "Admin"])

note = Entity(
    table="notes",
    soft_delete=True,
    fields={
        "title": fields.text(required=True, personal=False, reason="a subject line", sortable=True),
        "body": fields.long_text(personal="tenant"),
        # An assistant reads this as an instruction on a later run: only high-risk handlers
        # may write it.
        "assistant_hint": fields.long_text(
            personal=False, reason="instructions, not personal data", read_as_instruction=True
        ),
        "word_count": fields.integer(),
    },
)

notes = Feature("notes")
notes.crud(
    "note",
    note,
    write=EDITORS,
    read=Access(open_to_all="notes are shared inside a tenant"),
    exclude_fields={"update": ["word_count"], "create": ["word_count"]},
    descriptions={"create": "Create a note", "list": "List notes"},
)
notes.crud(
    "index-entry",
    Entity(
        table="note_index",
        fields={
            "title": fields.text(
                personal=False, reason="copied from the note title", filterable=True
            ),
            "words": fields.integer(),
        },
    ),
    write=Access(roles=["system"]),
    read=Access(open_to_all="the index is shared inside a tenant"),
    verbs=["create", "list"],
)


class QuickNote(BaseModel):
    """A note from a quick-entry box."""

    title: str = Field(max_length=200)
    body: str | None = None
    assistant_hint: str | None = None


@notes.write_handler(
    "quick-note",
    access=EDITORS,
    agent=Agent(risk="mid"),
    description="Jot down a note (cannot set assistant hints)",
)
def quick_note(payload: QuickNote, ctx: WriteContext) -> dict[str, Any]:
    return ctx.entity("note").create(payload.model_dump(exclude_none=True))


@notes.job(
    "index-note",
    on="notes:write:note:create",
    retries=2,
    backoff=Backoff.exponential(base=0.05),
)
def index_note(payload: dict[str, Any], ctx: JobContext) -> None:
    """Count the words of a new note and record them in the index (as the system user)."""
    if ctx.attempt == 1 and "flaky" in payload["title"]:
        raise ConnectionError("the search index was not reachable")
    words = len(str(payload.get("body") or "").split())
    ctx.write("notes:write:index-entry:create", {"title": payload["title"], "words": words})


digest = notes.workflow("digest", manual=True)


@digest.step("collect")
def collect(payload: dict[str, Any], ctx: StepContext) -> list[str]:
    """The titles of the tenant's notes."""
    listed = ctx.query_as(ctx.system_user, "notes:query:note:list", {"sort": ["title"]})
    return [row["title"] for row in listed["rows"]]


@digest.step("measure", after="collect", map=lambda ctx: ctx.results["collect"])
def measure(title: str, ctx: StepContext) -> int:
    """One job row per title, in parallel: its number of words."""
    return len(title.split())


@digest.step("summarise", after="measure")
def summarise(payload: dict[str, Any], ctx: StepContext) -> dict[str, int]:
    """Fan-in, once every title is measured: the results come in item order."""
    return {"notes": len(ctx.results["collect"]), "words": sum(ctx.results["measure"])}
