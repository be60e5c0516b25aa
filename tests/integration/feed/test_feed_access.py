"""What reaches a caller on the feed, checked on the raw bytes: only events of rows it may
read, without the fields it may not read, with personal values opened, ``[forgotten]``
after forget, never another tenant's."""

from __future__ import annotations

from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served
from tests.integration.feed.sse_client import open_stream

ADMIN, USER, OTHER = TestUsers.admin, TestUsers.user, TestUsers.other_tenant


def test_a_caller_receives_only_what_its_queries_could_show(stack: Stack, served: Served) -> None:
    with (
        open_stream(served.base_url, served.token(USER), {"types": "crm:event:*"}) as user,
        open_stream(served.base_url, served.token(ADMIN), {"types": "crm:event:*"}) as admin,
        open_stream(served.base_url, served.token(OTHER), {"types": "crm:event:*"}) as other,
    ):
        # The streams are open once the first bytes (the retry hint) arrive.
        for stream in (user, admin, other):
            stream.read_until(lambda s: b"retry:" in s.raw)
        ticket = stack.http.write_ok(
            "crm:write:ticket:create",
            {"title": "Printer jams", "email": "alice@example.com", "cost": 4242},
            ADMIN,
        )
        admin_note = stack.http.write_ok("crm:write:note:create", {"text": "admins-own"}, ADMIN)
        stack.http.write_ok("crm:write:audit:create", {"what": "audit-only-admins"}, ADMIN)
        stack.http.write_ok(
            "crm:write:ticket:create", {"title": "tenant-b-secret", "cost": 777}, OTHER
        )
        own_note = stack.http.write_ok("crm:write:note:create", {"text": "users-own"}, USER)
        # Every stream gets events in id order: once the user's own note arrived, everything
        # committed before it was sent or left out.
        user.read_until(lambda s: any(m.json["streamId"] == own_note["id"] for m in s.events))
        admin.read_until(lambda s: any(m.json["streamId"] == own_note["id"] for m in s.events))
        other.read_until(lambda s: len(s.events) == 1)

    user_bytes, admin_bytes, other_bytes = bytes(user.raw), bytes(admin.raw), bytes(other.raw)
    # The user: the ticket without the admins' field, its own note only.
    assert [m.json["streamId"] for m in user.events] == [ticket["id"], own_note["id"]]
    assert user.events[0].json["payload"]["data"]["email"] == "alice@example.com"
    assert "cost" not in user.events[0].json["payload"]["data"]
    assert b'"cost"' not in user_bytes
    assert admin_note["id"].encode() not in user_bytes
    assert b"admins-own" not in user_bytes and b"audit-only-admins" not in user_bytes
    assert b"tenant-b-secret" not in user_bytes
    # The admin: every row of its tenant, the admins' field included.
    assert [m.json["type"] for m in admin.events] == [
        "crm:event:ticket.created",
        "crm:event:note.created",
        "crm:event:audit.created",
        "crm:event:note.created",
    ]
    assert admin.events[0].json["payload"]["data"]["cost"] == 4242
    assert b"tenant-b-secret" not in admin_bytes
    # The other tenant: its own ticket only.
    assert [m.json["payload"]["data"]["title"] for m in other.events] == ["tenant-b-secret"]
    assert b"Printer jams" not in other_bytes and b"alice@example.com" not in other_bytes
    # Each message's id is the event's global position.
    assert all(int(m.id or 0) == m.json["id"] for m in admin.events)


def test_a_forgotten_subject_reads_forgotten_on_the_wire(stack: Stack, served: Served) -> None:
    ticket = stack.http.write_ok(
        "crm:write:ticket:create", {"title": "Call back", "email": "bob@example.com"}, ADMIN
    )
    stack.http.write_ok("crm:write:forget-ticket", {"id": ticket["id"]}, ADMIN)
    # From the start: the create (its e-mail now forgotten) and the forget event.
    with open_stream(served.base_url, served.token(ADMIN), {"after": 0}) as admin:
        admin.read_until(lambda s: len(s.events) == 2)
    assert b"bob@example.com" not in bytes(admin.raw)
    created, forgotten = admin.events
    assert created.json["payload"]["data"]["email"] == "[forgotten]"
    assert forgotten.json["type"] == "crm:event:ticket.forgotten"


def test_tabs_of_one_caller_share_bytes_that_a_caller_with_other_access_never_gets(
    stack: Stack, served: Served
) -> None:
    params = {"types": "crm:event:ticket.*"}
    with (
        open_stream(served.base_url, served.token(USER), params) as first,
        open_stream(served.base_url, served.token(USER), params) as second,
        open_stream(served.base_url, served.token(ADMIN), params) as admin,
    ):
        for stream in (first, second, admin):
            stream.read_until(lambda s: b"retry:" in s.raw)
        tickets = [
            stack.http.write_ok("crm:write:ticket:create", {"title": f"t{n}", "cost": 4242}, ADMIN)
            for n in range(3)
        ]
        last = tickets[-1]["id"]
        for stream in (first, second, admin):
            stream.read_until(lambda s: any(m.json["streamId"] == last for m in s.events))

    # One view's rendering went to both of the user's streams, the same bytes on each (but
    # for heartbeats, which come on each stream's own clock).
    assert without_heartbeats(first.raw) == without_heartbeats(second.raw)
    assert b'"cost"' not in bytes(first.raw)
    # The admin's view is its own: the same events, with the field the user may not read.
    assert admin.ids == first.ids
    assert [m.json["payload"]["data"]["cost"] for m in admin.events] == [4242] * 3


def without_heartbeats(raw: bytearray) -> bytes:
    return bytes(raw).replace(b": ping\n\n", b"")
