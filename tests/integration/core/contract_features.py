"""Fixture features for the write contracts: idempotent requests, state transitions, hooks."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, ConflictError, Entity, Feature, WriteContext, fields

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
