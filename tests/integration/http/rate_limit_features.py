"""Fixture feature for rate limits: one handler per scope, one that admits when Redis is down."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, RateLimit, WriteContext, fields

ADMIN = Access(roles=["Admin"])

limited = Feature("limited")
limited.crud(
    "mark",
    Entity(table="limited_marks", fields={"scope": fields.text(personal=False, reason="fixture")}),
    write=ADMIN,
    read=ADMIN,
)


class Mark(BaseModel):
    scope: str = "x"


def _mark(payload: Mark, ctx: WriteContext) -> Any:
    return ctx.entity("mark").create({"scope": payload.scope})


for scope in ("user", "tenant", "ip", "principal"):
    limited.write_handler(
        f"per-{scope}", access=ADMIN, rate_limit=RateLimit("2/minute", per=scope)
    )(_mark)
limited.write_handler(
    "open-when-down", access=ADMIN, rate_limit=RateLimit("2/minute", fail_open=True)
)(_mark)


@limited.query_handler("count", access=ADMIN, rate_limit=RateLimit("1/minute"))
def count(payload: Mark, ctx: Any) -> Any:
    return len(ctx.entity("mark").list()["rows"])
