"""Fixture features: a mailer with configuration, a secret and a job, switchable per tenant;
and a shop that calls the mailer from its own handler (a nested write)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, JobContext, QueryContext, WriteContext, fields
from asanoha.platform.errors import UnprocessableError

ADMIN = Access(roles=["Admin"])
#: Where the mailer's job writes what it saw (module state of the test process).
SEEN: list[dict[str, Any]] = []

mailer = Feature("mailer", toggleable=True)
mailer.config("sender", default="noreply@example.org")
mailer.config("retries", default=3, type=int)
mailer.config("region", default="eu", per_tenant=False)
mailer.secret("smtp_password")
sent = Entity(
    table="mailer_sent",
    fields={
        "to": fields.text(personal=False, reason="a fixture address"),
        "sender": fields.text(personal=False, reason="a fixture address"),
    },
)
mailer.crud("sent", sent, write=ADMIN, read=ADMIN)


class Send(BaseModel):
    to: str


class Nothing(BaseModel):
    pass


@mailer.write_handler("send", access=ADMIN)
def send(payload: Send, ctx: WriteContext) -> dict[str, Any]:
    """Sends with the tenant's sender, proving the password is there without showing it."""
    password = ctx.secrets.get("smtp_password")
    ctx.log.warning("sending with password %s", password)
    row = ctx.entity("sent").create({"to": payload.to, "sender": ctx.config["sender"]})
    return {
        "id": row["id"],
        "sender": ctx.config["sender"],
        "retries": ctx.config.get("retries"),
        "has_password": password is not None,
        "password_length": len(password or ""),
    }


@mailer.write_handler("leak", access=ADMIN)
def leak(payload: Nothing, ctx: WriteContext) -> dict[str, Any]:
    """Returns the secret: refused."""
    return {"password": ctx.secrets["smtp_password"]}


@mailer.write_handler("leak-into-event", access=ADMIN)
def leak_into_event(payload: Nothing, ctx: WriteContext) -> None:
    """Stores the secret in a plain field (its event would carry it): refused."""
    ctx.entity("sent").create({"to": "x@example.org", "sender": ctx.secrets["smtp_password"]})


@mailer.write_handler("leak-in-error", access=ADMIN)
def leak_in_error(payload: Nothing, ctx: WriteContext) -> None:
    """Raises an error whose details carry the secret: refused as well."""
    raise UnprocessableError(details={"password": ctx.secrets["smtp_password"]})


@mailer.query_handler("settings", access=ADMIN)
def settings(payload: Nothing, ctx: QueryContext) -> dict[str, Any]:
    """What a handler sees of its configuration, locale and time zone."""
    return {
        "config": dict(ctx.config),
        "locale": ctx.locale,
        "tz": ctx.tz.key,
    }


@mailer.job("record", on="mailer:write:send")
def record(payload: dict[str, Any], ctx: JobContext) -> None:
    password = ctx.secrets.get("smtp_password") or ""
    ctx.log.warning("job used password %s", password)
    SEEN.append(
        {
            "sender": ctx.config["sender"],
            "locale": ctx.locale,
            "tz": ctx.tz.key,
            "password_ok": password.startswith("pw-"),
            "tenant": ctx.tenant_id,
        }
    )


shop = Feature("shop")


@shop.write_handler("order", access=ADMIN)
def order(payload: Send, ctx: WriteContext) -> Any:
    """The shop's own handler mails through the mailer (a nested write)."""
    return ctx.write("mailer:write:send", {"to": payload.to})
