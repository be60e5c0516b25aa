"""A domain event's personal fields meet the public-intake gate as an entity's fields do.

An anonymous call whose access rule does not declare ``public_intake=True`` may not store a
personal value, whether it writes a row or appends a domain event: 403
``public_intake_required``, nothing written. With public intake declared, the value is
stored sealed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, AccessDeniedError, Feature, WriteContext
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.personal.scan import hits

EMAIL = "sender@example.org"

inbox = Feature("inbox")


class Message(BaseModel):
    email: str | None = None
    topic: str


received = inbox.event("message-received", Message, pii={"email": "self"})


def _receive(payload: Message, ctx: WriteContext) -> dict[str, int]:
    stored = ctx.append_event(received, payload.model_dump(), stream_id="inbox")
    return {"event": stored.id}


#: The fixture's anonymous handlers are called only by the tests below.
UNLIMITED: dict[str, Any] = {"rate_limit": None, "reason": "a test fixture"}
inbox.write_handler("contact", access=Access(public="a contact form"), **UNLIMITED)(_receive)
inbox.write_handler(
    "contact-with-intake",
    access=Access(public="a contact form", public_intake=True),
    **UNLIMITED,
)(_receive)


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[inbox], database=request.param)


def anonymous(stack: Any) -> SessionUser:
    return SessionUser.anonymous(TestUsers.admin.tenant_id)


def stored_events(stack: Any) -> list[str]:
    events = stack.tables.events
    with stack.db.connect() as conn:
        return list(conn.execute(select(events.c.type)).scalars())


def test_an_anonymous_event_without_public_intake_stores_no_personal_value(stack: Any) -> None:
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_write(
            "inbox:write:contact", {"email": EMAIL, "topic": "billing"}, anonymous(stack)
        )
    refused = raised.value
    assert (refused.http_status, refused.code, refused.reason) == (
        403,
        "access_denied",
        "public_intake_required",
    )
    assert refused.details["handler"] == "inbox:write:contact"
    assert refused.details["event"] == "inbox:event:message-received"
    assert refused.details["fields"] == ["email"]
    assert hits(stack, [EMAIL]) == []


def test_an_anonymous_event_without_a_personal_value_is_stored(stack: Any) -> None:
    stack.service.dispatch_write("inbox:write:contact", {"topic": "billing"}, anonymous(stack))
    assert stored_events(stack) == ["inbox:event:message-received"]


def test_public_intake_stores_the_value_sealed(stack: Any) -> None:
    stack.service.dispatch_write(
        "inbox:write:contact-with-intake", {"email": EMAIL, "topic": "billing"}, anonymous(stack)
    )
    assert stored_events(stack) == ["inbox:event:message-received"]
    assert hits(stack, [EMAIL]) == []
