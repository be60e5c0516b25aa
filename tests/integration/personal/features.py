"""Fixture features of the personal data suite: customers (their own data), their orders
(an address about the customer), a domain event with an e-mail, a job triggered by the
create, and a consumer that writes a mailing row about the customer."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel

from asanoha import (
    FORGOTTEN,
    Access,
    Agent,
    ConsumerContext,
    Entity,
    Feature,
    StoredEvent,
    WriteContext,
    fields,
)

ADMIN = Access(roles=["Admin"])

customer = Entity(
    table="personal_customers",
    fields={
        "email": fields.text(personal="self", filterable=True),
        "name": fields.text(personal="self"),
        "born": fields.date(personal="self"),
        "plan": fields.text(personal=False, reason="a product name"),
    },
    unique=(("email",),),
)
order = Entity(
    table="personal_orders",
    fields={
        "customer": fields.reference("personal:customer"),
        "address": fields.long_text(personal={"of": "customer"}),
        "item": fields.text(personal=False, reason="a product name"),
    },
)
mailing = Entity(
    table="personal_mailings",
    fields={
        "customer": fields.reference("personal:customer"),
        "email": fields.text(personal={"of": "customer"}),
    },
)

personal = Feature("personal")
personal.crud(
    "customer",
    customer,
    write=ADMIN,
    read=ADMIN,
    # An agent's create needs a human's approval: its summary shows the values.
    agent={"create": Agent(risk="high")},
)
personal.crud("order", order, write=ADMIN, read=ADMIN)
personal.crud("mailing", mailing, write=ADMIN, read=ADMIN)


class Contacted(BaseModel):
    email: str
    channel: str


contacted = personal.event("contacted", Contacted, pii={"email": "self"})


class Contact(BaseModel):
    id: uuid.UUID
    email: str


@personal.write_handler("contact", access=ADMIN)
def contact(payload: Contact, ctx: WriteContext) -> Any:
    """A domain event on the customer's stream, with the e-mail used."""
    stored = ctx.append_event(
        contacted, {"email": payload.email, "channel": "mail"}, stream_id=payload.id
    )
    return {"version": stored.version}


class RowId(BaseModel):
    id: uuid.UUID


@personal.write_handler("forget-customer", access=ADMIN, agent=Agent(risk="high"))
def forget_customer(payload: RowId, ctx: WriteContext) -> Any:
    return ctx.entity("customer").forget(payload.id)


class Invite(BaseModel):
    email: str
    plan: str


@personal.write_handler("invite", access=ADMIN, agent=Agent(risk="high"), personal=["email"])
def invite(payload: Invite, ctx: WriteContext) -> Any:
    """A custom handler that carries a personal value in its payload."""
    return ctx.entity("customer").create({"email": payload.email, "plan": payload.plan})


#: What ``welcome`` was given: (payload e-mail, trigger result e-mail).
WELCOMED: list[tuple[Any, Any]] = []


@personal.job("welcome", on="personal:write:customer:create")
def welcome(payload: dict[str, Any], ctx: Any) -> None:
    """Carries the create's payload (the e-mail) and its result in its job row."""
    WELCOMED.append((payload["email"], ctx.trigger.result["email"]))
    if payload["email"] is not FORGOTTEN:
        # Written on in a transaction of the job's own: stored sealed as well.
        ctx.dispatch("personal:job:send-mail", {"to": payload["email"]})


@personal.job("send-mail", manual=True)
def send_mail(payload: dict[str, Any], ctx: Any) -> None:
    WELCOMED.append((payload["to"], None))


@personal.consumer("mail-list", on=["personal:event:customer.created"])
def mail_list(event: StoredEvent, ctx: ConsumerContext) -> None:
    """A consumer's own write about the customer, from the (opened) event."""
    ctx.entity("mailing").create(
        {"customer": event.stream_id, "email": event.payload["data"]["email"]}
    )


#: What ``contact-log`` was given: (stream id, e-mail).
RECEIVED: list[tuple[str, Any]] = []


@personal.consumer("contact-log", on=[contacted.qn])
def contact_log(event: StoredEvent, ctx: ConsumerContext) -> None:
    RECEIVED.append((event.stream_id, event.payload["email"]))
