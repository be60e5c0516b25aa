"""Every way into a write meets the same contracts, refused the same way, persisting nothing.

A table over the entries (an HTTP write, an item of a batch, an MCP tool call, a nested
``ctx.write`` from another handler, a job's ``ctx.write_as``) and the contracts a write meets (field write
access, row ownership, the instruction-field gate, the irreversible-operation gate, public
intake of a row's and of a domain event's personal fields): each refusal answers its status, code and reason on every entry, and sends no write
at all (no event, row, outbox row, job or key change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import AsanohaError, Entity, Feature, JobContext, WriteContext, fields
from asanoha.platform.model import Access, SessionUser
from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from asanoha.testing.serving import serve_in_thread
from asanoha.testing.users import TENANT_A
from asanoha.workers.job_context import JobMeta
from tests.integration.agents.scenario import error_of
from tests.integration.agents.test_mcp_http import mcp_session

ANN = SessionUser.of("ann", TENANT_A, ["Staff"])
BOB = SessionUser.of("bob", TENANT_A, ["Staff"])
ANONYMOUS = SessionUser.anonymous(TENANT_A)
#: The standard handlers' rule: each row is its creator's.
OWN_ROWS = Access(roles=["Staff"], owner="created_by")
STAFF = Access(roles=["Staff"])
ANYONE: dict[str, Any] = {
    "access": Access(public="the entry table's fixture"),
    "rate_limit": None,
    "reason": "a test fixture",
}

card = Entity(
    table="entries_cards",
    fields={
        "title": fields.text(personal=False, reason="a title"),
        "grade": fields.select(["a", "b"], default="a", write=Access(roles=["HR"])),
        "body": fields.long_text(personal=False, reason="a prompt", read_as_instruction=True),
        "email": fields.text(personal="self"),
    },
)

entries = Feature("entries")
entries.crud("card", card, write=OWN_ROWS, read=OWN_ROWS)


class Edit(BaseModel):
    id: str
    version: int
    changes: dict[str, Any]


class Target(BaseModel):
    id: str


class Contact(BaseModel):
    title: str
    email: str


class Relayed(BaseModel):
    qn: str
    payload: dict[str, Any]


@entries.write_handler("edit", access=STAFF, description="Change a card.")
def edit(payload: Edit, ctx: WriteContext) -> Any:
    """Mid risk: changes whatever it is given."""
    return ctx.entity("card").update(payload.id, payload.changes, version=payload.version)


@entries.write_handler("remove", access=STAFF, description="Delete a card.")
def remove(payload: Target, ctx: WriteContext) -> Any:
    """Mid risk: a hard delete (the entity has no soft delete)."""
    return ctx.entity("card").delete(payload.id)


@entries.write_handler("contact", **ANYONE, description="Leave a contact.")
def contact(payload: Contact, ctx: WriteContext) -> Any:
    """Anyone, without public intake: a personal field is not theirs to write."""
    return ctx.entity("card").create(payload.model_dump())


class Shouted(BaseModel):
    email: str


shouted = entries.event("shouted", Shouted, pii={"email": "self"})


@entries.write_handler("shout", **ANYONE, description="Shout an address.")
def shout(payload: Shouted, ctx: WriteContext) -> Any:
    """Anyone, without public intake, through a domain event with a personal field."""
    return {"event": ctx.append_event(shouted, payload.model_dump(), stream_id="shouts").id}


@entries.write_handler("relay", **ANYONE)
def relay(payload: Relayed, ctx: WriteContext) -> Any:
    """Mid risk: passes the call on as a nested write of the same caller."""
    return ctx.write(payload.qn, payload.payload)


@entries.write_handler("relay-later", **ANYONE)
def relay_later(payload: Relayed, ctx: WriteContext) -> dict[str, str]:
    """Mid risk: its job passes the call on."""
    return {"qn": payload.qn}


@entries.job("relayed", on="entries:write:relay-later")
def relayed(payload: dict[str, Any], ctx: JobContext) -> None:
    who = payload["as"]
    user = (
        SessionUser.anonymous(TENANT_A)
        if who["anonymous"]
        else SessionUser.of(who["id"], TENANT_A, who["roles"])
    )
    ctx.write_as(user, payload["qn"], payload["payload"])


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    reason: str


def call_http(stack: Stack, user: SessionUser, qn: str, payload: dict[str, Any]) -> Refusal:
    with stack.nothing_written():
        error = stack.http.write_err(qn, payload, user)
    return Refusal(error.http_status, error.code, error.reason)


def call_batch(stack: Stack, user: SessionUser, qn: str, payload: dict[str, Any]) -> Refusal:
    with stack.nothing_written():
        response = stack.http.batch([(qn, payload)], user)
    error = response.json()["error"]
    if response.status_code != 401:
        assert error["details"]["index"] == 0
    return Refusal(response.status_code, error["code"], error["reason"])


#: The HTTP status of each error code, as the API answers it (a tool error carries the code).
STATUS_OF_CODE = {
    kind.code: kind.http_status
    for kind in (AsanohaError, *AsanohaError.__subclasses__())
    for kind in (kind, *kind.__subclasses__())
}


def call_mcp(stack: Stack, user: SessionUser, qn: str, payload: dict[str, Any]) -> Refusal:
    """The handler as an MCP tool over streamable HTTP, called as ``user``."""
    with serve_in_thread(stack.app.build_http()) as base_url:
        if user.is_anonymous:
            # MCP is for signed-in callers: the session is refused before any tool runs.
            with stack.nothing_written():
                answer = httpx.post(f"{base_url}/mcp", json={}, timeout=30)
            error = answer.json()["error"]
            return Refusal(answer.status_code, error["code"], error["reason"])

        async def scenario() -> dict[str, Any]:
            async with mcp_session(f"{base_url}/mcp", stack, user) as session:
                with stack.nothing_written():
                    result = await session.call_tool(qn, payload)
            return error_of(result)

        error = anyio.run(scenario)
    return Refusal(STATUS_OF_CODE[error["code"]], error["code"], error["reason"])


def call_nested(stack: Stack, user: SessionUser, qn: str, payload: dict[str, Any]) -> Refusal:
    with stack.nothing_written():
        error = stack.http.write_err("entries:write:relay", {"qn": qn, "payload": payload}, user)
    return Refusal(error.http_status, error.code, error.reason)


def call_job(stack: Stack, user: SessionUser, qn: str, payload: dict[str, Any]) -> Refusal:
    """The job of a write by ``user``, run from the headers its row holds."""
    who = {"anonymous": user.is_anonymous, "id": user.id, "roles": sorted(user.roles)}
    stack.http.write_ok("entries:write:relay-later", {"qn": qn, "payload": {**payload}}, user)
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        row = conn.execute(select(outbox).where(outbox.c.job_qn == "entries:job:relayed")).one()
    job = stack.registry.job("entries:job:relayed")
    assert job is not None
    ctx = JobContext(stack.service, job, JobMeta.from_headers(row.headers), task_id="t", retries=0)
    with stack.nothing_written(), pytest.raises(AsanohaError) as raised:
        relayed({**row.payload, "as": who}, ctx)
    error = raised.value
    return Refusal(error.http_status, error.code, str(error.reason))


#: Where an entry answers otherwise: a batch is for signed-in callers, so an anonymous one
#: is refused before any of its items runs.
OTHERWISE = {
    (contract, entry): Refusal(401, "unauthenticated", "token_missing")
    for contract in ("event_intake", "public_intake")
    for entry in ("batch", "mcp")
}

ENTRIES: dict[str, Callable[[Stack, SessionUser, str, dict[str, Any]], Refusal]] = {
    "http": call_http,
    "batch": call_batch,
    "mcp": call_mcp,
    "nested": call_nested,
    "job": call_job,
}


def ann_card(stack: Stack) -> dict[str, Any]:
    row: dict[str, Any] = stack.http.write_ok(
        "entries:write:card:create", {"title": "t", "email": "ann@example.org"}, ANN
    )
    return row


def field_access(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    row = ann_card(stack)
    changes = {"id": str(row["id"]), "version": row["version"], "changes": {"grade": "b"}}
    return ANN, "entries:write:edit", changes, Refusal(403, "access_denied", "field_write_denied")


def ownership(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    row = ann_card(stack)
    changes = {"id": str(row["id"]), "version": row["version"], "changes": {"title": "x"}}
    return BOB, "entries:write:edit", changes, Refusal(404, "not_found", "entity_not_found")


def instruction_gate(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    row = ann_card(stack)
    changes = {"id": str(row["id"]), "version": row["version"], "changes": {"body": "obey"}}
    reason = "instruction_field_write_requires_high_risk"
    return ANN, "entries:write:edit", changes, Refusal(403, "access_denied", reason)


def irreversible_gate(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    row = ann_card(stack)
    reason = "irreversible_operation_requires_high_risk"
    return (
        ANN,
        "entries:write:remove",
        {"id": str(row["id"])},
        Refusal(403, "access_denied", reason),
    )


def public_intake(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    payload = {"title": "hello", "email": "someone@example.org"}
    refusal = Refusal(403, "access_denied", "public_intake_required")
    return ANONYMOUS, "entries:write:contact", payload, refusal


def event_intake(stack: Stack) -> tuple[SessionUser, str, dict[str, Any], Refusal]:
    refusal = Refusal(403, "access_denied", "public_intake_required")
    return ANONYMOUS, "entries:write:shout", {"email": "someone@example.org"}, refusal


CONTRACTS = {
    "event_intake": event_intake,
    "field_access": field_access,
    "ownership": ownership,
    "instruction_gate": instruction_gate,
    "irreversible_gate": irreversible_gate,
    "public_intake": public_intake,
}


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[entries], database=request.param)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("contract", sorted(CONTRACTS))
def test_every_entry_meets_the_contract_refused_alike_with_nothing_written(
    stack: Stack, contract: str, entry: str
) -> None:
    user, qn, payload, expected = CONTRACTS[contract](stack)
    expected = OTHERWISE.get((contract, entry), expected)
    assert ENTRIES[entry](stack, user, qn, payload) == expected
