"""The application under test: a create triggers a job that fails once, then succeeds."""

from __future__ import annotations

from typing import Any

from asanoha import Access, Backoff, Entity, Feature, fields

order = Entity(
    table="example_orders",
    fields={"item": fields.text(required=True, personal=False, reason="what was ordered")},
)
feature = Feature("shop")
feature.crud("order", order, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.job("confirm", on="shop:write:order:create", retries=2, backoff=Backoff.fixed(0.1))
def confirm(payload: dict[str, Any], ctx: Any) -> None:
    if ctx.attempt == 1:
        raise ConnectionError("the mail server did not answer")
