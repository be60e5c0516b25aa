"""Fixture features for the write contracts: idempotent requests, state transitions, hooks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from asanoha import (
    Access,
    Agent,
    ConflictError,
    Entity,
    Feature,
    StoredEvent,
    ValidationError,
    WriteContext,
    fields,
)

ADMIN = Access(roles=["Admin"])

order = Entity(
    table="contract_orders",
    fields={"title": fields.text(required=True, personal=False, reason="fixture")},
)

contracts = Feature("contracts")
contracts.crud("order", order, write=ADMIN, read=ADMIN)


class Place(BaseModel):
    title: str


@contracts.write_handler("place", access=ADMIN)
def place(payload: Place, ctx: WriteContext) -> Any:
    """Create an order; a job follows every placed order."""
    return ctx.entity("order").create({"title": payload.title})


@contracts.write_handler("place-then-refuse", access=ADMIN)
def place_then_refuse(payload: Place, ctx: WriteContext) -> Any:
    """Write an order, then refuse: the refusal undoes the order."""
    ctx.entity("order").create({"title": payload.title})
    raise ConflictError(title=payload.title)


@contracts.write_handler("place-twice", access=ADMIN)
def place_twice(payload: Place, ctx: WriteContext) -> Any:
    """Two nested writes with one key: the second answers the first's outcome."""
    first = ctx.write("contracts:write:place", {"title": payload.title}, idempotency_key="k")
    second = ctx.write("contracts:write:place", {"title": payload.title}, idempotency_key="k")
    return {"first": str(first["id"]), "second": str(second["id"])}


@contracts.job("order-placed", on="contracts:write:place")
def order_placed(payload: dict[str, Any], ctx: Any) -> None:
    """Follows every placed order."""


@contracts.write_handler("crash", access=ADMIN)
def crash(payload: Place, ctx: WriteContext) -> Any:
    """Write an order, then fail unexpectedly (a 500)."""
    ctx.entity("order").create({"title": payload.title})
    raise RuntimeError("the application broke")


STATES = ("draft", "review", "published")
article = Entity(
    table="contract_articles",
    fields={
        "title": fields.text(personal=False, reason="fixture"),
        "status": fields.select(STATES, default="draft"),
    },
    transitions={"status": {"draft": ["review"], "review": ["draft", "published"]}},
)
contracts.crud("article", article, write=ADMIN, read=ADMIN)


class SetStatus(BaseModel):
    status: str


@contracts.write_handler(
    "import-article", access=ADMIN, skip_transition_guard="imports keep the source's state"
)
def import_article(payload: SetStatus, ctx: WriteContext) -> Any:
    """Create an article in any state."""
    return ctx.entity("article").create({"status": payload.status})


ticket = Entity(
    table="contract_tickets",
    soft_delete=False,
    fields={
        "title": fields.text(required=True, personal=False, reason="fixture"),
        "priority": fields.select(("low", "normal"), default="normal"),
        "guide": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)
contracts.crud("ticket", ticket, write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="high")})
#: What the hooks saw, for the tests to read (each test clears them).
VALIDATED: list[dict[str, Any]] = []
DELETED: list[str] = []
COMMITTED: list[StoredEvent] = []
#: Called by the after-commit hook with each event, when a test sets it.
AFTER_COMMIT_PROBE: list[Callable[[StoredEvent], None]] = []


@contracts.validate("ticket")
def titles_are_not_bad(data: dict[str, Any], previous: Any, is_new: bool) -> None:
    VALIDATED.append(dict(data))
    if data.get("title") == "bad":
        raise ValidationError(
            fields=[{"path": "title", "type": "refused", "message": "'bad' is no title"}]
        )


@contracts.pre_delete("ticket")
def keep_kept_tickets(row: dict[str, Any], ctx: Any) -> None:
    if row["title"] == "keep":
        raise ConflictError(title=row["title"])


@contracts.post_delete("ticket")
def note_deleted(row: dict[str, Any], ctx: Any) -> None:
    if row["title"] == "fail-after-delete":
        raise RuntimeError("post_delete refuses")
    DELETED.append(str(row["id"]))


@contracts.after_commit("ticket")
def note_committed(event: StoredEvent) -> None:
    COMMITTED.append(event)
    for probe in AFTER_COMMIT_PROBE:
        probe(event)
    if event.payload.get("data", {}).get("title") == "explode":
        raise RuntimeError("after_commit fails")


@contracts.write_handler("note-ticket", access=ADMIN, agent=Agent(risk="mid"))
def note_ticket(payload: Place, ctx: WriteContext) -> Any:
    """A mid-risk write of an instruction field: the gate refuses it (403)."""
    return ctx.entity("ticket").create({"title": payload.title, "guide": "do this"})


#: ``place-held`` sets ENTERED once its write is made, then waits for RELEASE.
ENTERED = threading.Event()
RELEASE = threading.Event()


@contracts.write_handler("place-held", access=ADMIN)
def place_held(payload: Place, ctx: WriteContext) -> Any:
    """Create an order and hold the transaction open until the test releases it."""
    row = ctx.entity("order").create({"title": payload.title})
    ENTERED.set()
    RELEASE.wait(30)
    return row
