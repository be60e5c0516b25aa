"""``read_events`` and ``read_event`` hand out personal values opened, as consumers get
them; forgotten ones read as ``FORGOTTEN``; ``opened=False`` keeps them sealed."""

from __future__ import annotations

from typing import Any

from asanoha.platform.personal import FORGOTTEN, cipher
from asanoha.platform.store import read_event, read_events
from asanoha.testing import TestUsers
from tests.integration.personal.test_forget import ALICE, BOB, customer_with_everything

ADMIN = TestUsers.admin
CREATED = "personal:event:customer.created"
CONTACTED = "personal:event:contacted"


def stream_values(stack: Any, row_id: str, **options: Any) -> dict[str, Any]:
    """The created event's e-mail and name and the contacted event's e-mail of a stream."""
    with stack.db.connect() as conn:
        events = read_events(conn, stack.tables, stream_id=row_id, **options)
        created = next(event for event in events if event.type == CREATED)
        contacted = next(event for event in events if event.type == CONTACTED)
        single = read_event(conn, stack.tables, created.id, **options)
    assert single is not None and single.payload == created.payload
    return {
        "email": created.payload["data"]["email"],
        "name": created.payload["data"]["name"],
        "contact": contacted.payload["email"],
    }


def test_read_events_opens_personal_values_as_consumers_get_them(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")["id"]
    bob = customer_with_everything(stack, BOB, "bob-order")["id"]
    assert stream_values(stack, alice) == {
        "email": ALICE["email"],
        "name": ALICE["name"],
        "contact": ALICE["contact"],
    }
    sealed = stream_values(stack, alice, opened=False)
    assert all(cipher.is_sealed(value) for value in sealed.values())

    stack.http.write_ok("personal:write:forget-customer", {"id": alice}, ADMIN)
    assert all(value is FORGOTTEN for value in stream_values(stack, alice).values())
    assert stream_values(stack, bob)["email"] == BOB["email"]
