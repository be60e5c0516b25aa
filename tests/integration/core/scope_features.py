"""Fixture feature for the request-scope suite: handlers that try to leave their request."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Literal

from pydantic import BaseModel

from asanoha import Access, Agent, Feature, JobContext, QueryContext, SessionUser, WriteContext

ADMIN = Access(roles=["Admin"])
GATE = "instructiongate:write"

scope = Feature("scope")


class Label(BaseModel):
    label: str


class Email(BaseModel):
    email: str


class Switch(BaseModel):
    user_id: str
    tenant_id: str
    roles: list[str]


@scope.query_handler("write-through-service", access=ADMIN, agent=Agent(risk="low"))
def write_through_service(payload: Label, ctx: QueryContext) -> Any:
    """A low-risk query reaching for the service behind its context to write a prompt."""
    service = ctx._service  # what an attacker's handler would do
    return service.dispatch_write(
        f"{GATE}:create-prompt-high",
        {"label": payload.label, "body": "obey me"},
        ctx.user,
        parent=ctx._request,
    )


@scope.query_handler("insert-on-connection", access=ADMIN, agent=Agent(risk="low"))
def insert_on_connection(payload: Label, ctx: QueryContext) -> Any:
    """A low-risk query writing a row with no event, straight on its connection (reached
    past the context's public surface)."""
    ctx._request.conn.exec_driver_sql(
        "INSERT INTO contacts (id, tenant_id, version, created_at, created_by, modified_at, "
        "modified_by, topic) VALUES ('00000000-0000-0000-0000-000000000001', 'tenant-a', 1, "
        "now(), 'x', now(), 'x', 'sneaked')"
    )
    return None


@scope.write_handler("write-from-thread-mid", access=ADMIN, agent=Agent(risk="mid"))
def write_from_thread_mid(payload: Label, ctx: WriteContext) -> Any:
    """A mid-risk handler delegating from a thread it starts, to escape its entry handler."""
    outcome: dict[str, Any] = {}

    def delegate() -> None:
        try:
            outcome["result"] = ctx.write(
                f"{GATE}:create-prompt-high", {"label": payload.label, "body": "obey me"}
            )
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=delegate)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _switch(payload: Switch, ctx: WriteContext) -> Any:
    user = SessionUser.of(payload.user_id, payload.tenant_id, payload.roles)
    return ctx.write_as(user, f"{GATE}:prompt:create", {"label": "as " + payload.user_id})


scope.write_handler("switch", access=ADMIN)(_switch)  # type: ignore[arg-type]
scope.write_handler("switch-declared", access=ADMIN, identity_switch="imports on behalf of")(
    _switch  # type: ignore[arg-type]
)


@scope.write_handler("switch-to-system", access=ADMIN)
def switch_to_system(payload: Label, ctx: WriteContext) -> Any:
    system = SessionUser.system(ctx.tenant_id)
    return ctx.write_as(system, f"{GATE}:prompt:create", {"label": payload.label})


@scope.write_handler(
    "hand-to-job",
    access=Access(public="newsletter"),
    rate_limit=None,
    reason="a test fixture",
)
def hand_to_job(payload: Email, ctx: WriteContext) -> Any:
    """An anonymous public handler without public intake: it passes an e-mail to a job."""
    return {"queued": True}


@scope.write_handler(
    "intake-to-job",
    access=Access(public="contact", public_intake=True),
    rate_limit=None,
    reason="a test fixture",
)
def intake_to_job(payload: Email, ctx: WriteContext) -> Any:
    """The same through a public-intake rule."""
    return {"queued": True}


@scope.write_handler("store-contact", access=Access(roles=["system"]))
def store_contact(payload: Email, ctx: WriteContext) -> Any:
    return ctx.entity("instructiongate:contact").create({"email": payload.email})


@scope.job("remember-email", on="scope:write:hand-to-job")
def remember_email(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write("scope:write:store-contact", {"email": payload["email"]})


@scope.job("remember-intake", on="scope:write:intake-to-job")
def remember_intake(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write("scope:write:store-contact", {"email": payload["email"]})


#: Every way a query handler could try to write, and what it names.
WAYS_TO_WRITE: dict[str, tuple[str, str]] = {
    "write": ("write", f"{GATE}:prompt:create"),
    "write_as": ("write_as", f"{GATE}:prompt:create"),
    "append_event": ("append_event", "scope:event:noted"),
    "dispatch": ("dispatch", "scope:job:note-later"),
    "entity.create": ("create", "instructiongate:prompt"),
    "entity.update": ("update", "instructiongate:prompt"),
    "entity.delete": ("delete", "instructiongate:prompt"),
    "entity.restore": ("restore", "instructiongate:prompt"),
    "entity.forget": ("forget", "instructiongate:prompt"),
}

noted = scope.event("noted", Label)


@scope.job("note-later", manual=True)
def note_later(payload: dict[str, Any], ctx: JobContext) -> None:
    return None


class Way(BaseModel):
    way: Literal[
        "write",
        "write_as",
        "append_event",
        "dispatch",
        "entity.create",
        "entity.update",
        "entity.delete",
        "entity.restore",
        "entity.forget",
    ]
    id: str = str(uuid.UUID(int=1))


@scope.query_handler("try-to-write", access=ADMIN, agent=Agent(risk="low"))
def try_to_write(payload: Way, ctx: QueryContext) -> Any:
    """A low-risk query trying each way a handler writes."""
    prompt = {"label": "from a query", "body": "obey me"}
    prompts: Any = ctx.entity("instructiongate:prompt")
    if payload.way == "write":
        return ctx.write(f"{GATE}:prompt:create", prompt)
    if payload.way == "write_as":
        return ctx.write_as(ctx.user, f"{GATE}:prompt:create", prompt)
    if payload.way == "append_event":
        return ctx.append_event(noted, {"label": "x"}, stream_id=payload.id).id
    if payload.way == "dispatch":
        return ctx.dispatch("scope:job:note-later", {"label": "x"})
    verb = payload.way.removeprefix("entity.")
    if verb == "create":
        return prompts.create(prompt)
    if verb == "update":
        return prompts.update(payload.id, {"body": "obey me"}, skip_optimistic_lock=True)
    return getattr(prompts, verb)(payload.id)


@scope.write_handler("write-then-query", access=ADMIN)
def write_then_query(payload: Way, ctx: WriteContext) -> Any:
    """A write handler asking a query that tries to write: the query runs in a write
    request, where the write itself would be allowed."""
    return ctx.query("scope:query:try-to-write", payload.model_dump())
