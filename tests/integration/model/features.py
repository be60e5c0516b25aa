"""Fixture features of the model's field kinds: references with labels and a restricting
delete, bounded fields, multi_select and timezone fields."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, WriteContext, fields

ADMIN = Access(roles=["Admin"])

customer = Entity(
    table="mf_customers",
    fields={
        "name": fields.text(required=True, personal=False, reason="fixture"),
        "email": fields.text(personal="self", format="email", filterable=True),
    },
    label_field="name",
    soft_delete=True,
)

category = Entity(
    table="mf_categories",
    fields={"title": fields.text(required=True, personal=False, reason="fixture")},
)

order = Entity(
    table="mf_orders",
    fields={
        "customer": fields.reference("customer", on_delete="restrict", filterable=True),
        "category": fields.reference("category", label_field="title"),
        "quantity": fields.integer(min=1, max=100),
        "due": fields.date(min="2020-01-01", max="2099-12-31"),
        "website": fields.text(personal=False, reason="fixture", format="url"),
        "phone": fields.text(personal=False, reason="fixture", format="phone"),
        "tags": fields.multi_select(["rush", "gift", "fragile"], min_items=1, max_items=2),
        "zone": fields.timezone(filterable=True),
    },
    soft_delete=True,
)

shop = Feature("shop")
shop.crud(
    "customer",
    customer,
    write=ADMIN,
    read=ADMIN,
    agent={"delete": Agent(risk="high")},
)
shop.crud("category", category, write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="high")})
shop.crud(
    "order",
    order,
    write=ADMIN,
    read=ADMIN,
    descriptions={"create": "Place an order.", "list": "List orders."},
)


class RowId(BaseModel):
    id: uuid.UUID


@shop.write_handler("forget-customer", access=ADMIN, agent=Agent(risk="high"))
def forget_customer(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("customer").forget(payload.id)


address = fields.embedded(
    {
        "street": fields.text(required=True),
        "city": fields.text(),
        "since": fields.date(min="2000-01-01"),
    },
    personal={"of": "customer"},
)
invoice = Entity(
    table="mf_invoices",
    fields={
        "customer": fields.reference("customer", required=True),
        "total": fields.money(required=True, min="0"),
        "ship_to": address,
        "lines": fields.embedded_list(
            {
                "item": fields.text(required=True, max_length=40),
                "qty": fields.integer(required=True, min=1),
                "price": fields.money(),
                "tags": fields.multi_select(["gift", "rush"]),
            },
            personal=False,
            reason="fixture",
            max_items=3,
        ),
        "due": fields.located_timestamp(min="2020-01-01T00:00:00+00:00"),
    },
)
shop.crud("invoice", invoice, write=ADMIN, read=ADMIN, descriptions={"create": "Write an invoice."})
