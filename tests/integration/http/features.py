"""Fixture features of the HTTP suite."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, Entity, Feature, QueryContext, WriteContext, fields

ADMIN = Access(roles=["Admin"])

# The instruction-field gate example of the design document.
prompt = Entity(
    table="prompts",
    fields={
        "label": fields.text(required=True, personal=False, reason="fixture"),
        "body": fields.long_text(personal=False, reason="fixture", read_as_instruction=True),
    },
)
gate = Feature("instructiongate")
gate.crud("prompt", prompt, write=ADMIN, read=ADMIN)


class CreatePrompt(BaseModel):
    label: str
    body: str | None = None


@gate.write_handler("create-prompt-mid", access=ADMIN, agent=Agent(risk="mid"))
def create_prompt_mid(payload: CreatePrompt, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").create(payload.model_dump(exclude_none=True))


@gate.write_handler("create-prompt-high", access=ADMIN, agent=Agent(risk="high"))
def create_prompt_high(payload: CreatePrompt, ctx: WriteContext) -> Any:
    return ctx.entity("prompt").create(payload.model_dump(exclude_none=True))


# An entity with a field of every scalar kind, for wire types and generated payloads.
item = Entity(
    table="catalog_items",
    fields={
        "name": fields.text(required=True, personal=False, reason="product name", max_length=80),
        "notes": fields.long_text(personal=False, reason="free text about the product"),
        "quantity": fields.integer(),
        "weight": fields.number(),
        "price": fields.decimal(),
        "active": fields.boolean(),
        "status": fields.select(choices=["draft", "live"]),
        "available_from": fields.timestamp(),
        "launch": fields.date(),
        "supplier": fields.reference("supplier"),
        "attributes": fields.json(),
    },
)
catalog = Feature("catalog")
# What an item's supplier refers to: a test creates the row it names (a generated id names
# no row of it, answered 422 reference_not_found).
catalog.crud(
    "supplier",
    Entity(
        table="catalog_suppliers",
        fields={"name": fields.text(personal=False, reason="company name")},
        label_field="name",
    ),
    write=ADMIN,
    read=ADMIN,
    verbs=["create"],
)
SUPPLIER_CREATE = "catalog:write:supplier:create"
catalog.crud(
    "item",
    item,
    write=ADMIN,
    read=Access(roles=["Admin", "User"]),
    descriptions={
        "create": "Create a catalog item.",
        "update": "Change a catalog item.",
        "delete": "Delete a catalog item for good.",
        "list": "List catalog items.",
    },
)


# Documents with a file and an image: a generated id names no upload of the tenant
# (answered 422 file_not_found).
catalog.crud(
    "document",
    Entity(
        table="catalog_documents",
        fields={
            "manual": fields.file(types=["application/pdf"], max_size=1_000_000),
            "cover": fields.image(),
        },
    ),
    write=ADMIN,
    read=ADMIN,
    verbs=["create", "update", "detail", "list"],
)


class Nothing(BaseModel):
    pass


class Rename(BaseModel):
    name: str


@catalog.write_handler("explode", access=ADMIN)
def explode(payload: Nothing, ctx: WriteContext) -> Any:
    raise RuntimeError("secret internals")


@catalog.write_handler("rename-all", access=ADMIN, description="Create an item, then fail.")
def create_then_fail(payload: Rename, ctx: WriteContext) -> Any:
    ctx.entity("item").create({"name": payload.name})
    raise RuntimeError("after the insert")


@catalog.query_handler(
    "ping",
    access=Access(public="a liveness probe for clients"),
    rate_limit=None,
    reason="a test fixture; it reads nothing",
)
def ping(payload: Nothing, ctx: QueryContext) -> Any:
    return {"pong": True, "tenant": ctx.user.tenant_id, "anonymous": ctx.user.is_anonymous}


@catalog.query_handler("whoami", access=Access(open_to_all="callers may see themselves"))
def whoami(payload: Nothing, ctx: QueryContext) -> Any:
    return {"id": ctx.user.id, "tenant": ctx.user.tenant_id, "roles": sorted(ctx.user.roles)}
