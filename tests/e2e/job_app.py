"""The application ``asanoha worker`` runs in the fleet tests (settings from ``ASANOHA_*``)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from asanoha.app import App
from asanoha.platform.model import Access, Backoff, Entity, Feature, fields

feature = Feature("fleet")
feature.crud(
    "mark",
    Entity(table="fleet_marks", fields={"n": fields.integer(required=True)}),
    write=Access(roles=["system", "Admin"]),
    read=Access(roles=["system", "Admin"]),
)


class Order(BaseModel):
    n: int


@feature.write_handler("order", access=Access(roles=["Admin"]))
def order(payload: Order, ctx: Any) -> dict[str, int]:
    return {"n": payload.n}


@feature.job("mark", manual=True, timeout=20)
def mark(payload: dict[str, Any], ctx: Any) -> None:
    """One write per job: the row that proves the job ran."""
    ctx.write("fleet:write:mark:create", {"n": payload["n"]})


@feature.job("confirm", on="fleet:write:order", timeout=20)
def confirm(payload: dict[str, Any], ctx: Any) -> None:
    ctx.write("fleet:write:mark:create", {"n": payload["n"]})


@feature.job("explode", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=20)
def explode(payload: dict[str, Any], ctx: Any) -> None:
    """Kills its process on every attempt, as an out-of-memory kill would."""
    os._exit(1)


app = App([feature])
