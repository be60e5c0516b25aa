"""The application the deploy material runs: replace this folder with your own (``--app``)."""

from __future__ import annotations

from typing import Any

from asanoha import Access, App, Backoff, Entity, Feature, fields

ADMIN = Access(roles=["Admin"])

order = Entity(
    table="shop_orders",
    fields={
        "item": fields.text(required=True, personal=False, reason="what was ordered"),
        "quantity": fields.integer(),
    },
)
feature = Feature("shop")
feature.crud("order", order, write=ADMIN, read=ADMIN)


@feature.job("confirm", on="shop:write:order:create", retries=3, backoff=Backoff.exponential(base=2))
def confirm(payload: dict[str, Any], ctx: Any) -> None:
    """Send the order confirmation (here: only log it)."""
    ctx.log.info("order confirmed")


@feature.job("nightly-report", cron="0 2 * * *")
def nightly_report(payload: dict[str, Any], ctx: Any) -> None:
    """A cron job: beat starts it every night at 02:00."""


app = App([feature])
