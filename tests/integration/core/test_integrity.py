"""The event log and the entity rows stay one: who may append entity events, stream versions,
unique violations, tenant-scoped ids, forget."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import (
    AccessDeniedError,
    ConflictError,
    SessionUser,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.errors import InternalError
from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.store import append_event, read_events, rebuild_projection
from asanoha.testing import TestUsers
from tests.integration.core.features import gate
from tests.integration.core.integrity_features import integrity, other

ADMIN = TestUsers.admin
OTHER_TENANT = TestUsers.other_tenant
NOTE = "integrity:write:note"
HANDLE = "integrity:write:handle"


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    """The integrity feature (with the gate feature and a foreign one) on each database."""
    return asanoha_stack(features=[integrity, gate, other], database=request.param)


def create_note(stack: Any, user: SessionUser = ADMIN, **data: Any) -> dict[str, Any]:
    row: dict[str, Any] = stack.service.dispatch_write(
        f"{NOTE}:create", {"title": "n", **data}, user
    )
    return row


def detail(stack: Any, row_id: Any, user: SessionUser = ADMIN) -> Any:
    return stack.service.dispatch_query("integrity:query:note:detail", {"id": str(row_id)}, user)


def stream(stack: Any, row_id: Any, tenant_id: str = ADMIN.tenant_id) -> list[Any]:
    """The stream's events as stored (personal values sealed)."""
    events: list[Any] = []
    with stack.db.connect() as conn:
        while True:
            page = read_events(
                conn,
                stack.tables,
                after=events[-1].id if events else 0,
                stream_id=str(row_id),
                tenant_id=tenant_id,
                opened=False,
            )
            if not page:
                return events
            events += page


def rows_of(stack: Any, key: str) -> list[dict[str, Any]]:
    table = stack.tables.entity(key)
    with stack.db.connect() as conn:
        found = conn.execute(select(table).order_by(table.c.tenant_id, table.c.id)).mappings()
        return [dict(row) for row in found]


def rebuild(stack: Any, key: str) -> int:
    with stack.db.begin() as conn:
        return rebuild_projection(conn, stack.tables, stack.registry.entity(key))


# -- entity events come from the entity executor only -------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        "integrity:event:note.updated",  # the handler's own feature's entity
        "integrity:event:note.forgotten",
        "instructiongate:event:prompt.updated",  # another feature's entity
        "other:event:pinged",  # another feature's domain event
    ],
)
def test_a_handler_appends_no_entity_event_and_no_foreign_event(stack: Any, event: str) -> None:
    row = create_note(stack)
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_write(
            "integrity:write:append-any",
            {"event": event, "stream_id": str(row["id"]), "payload": {"changes": {"title": "x"}}},
            ADMIN,
        )
    error = raised.value
    assert error.http_status == 403
    assert error.reason == "event_append_denied"
    assert error.details["handler"] == "integrity:write:append-any"
    assert error.details["event"] == event
    assert "integrity:write:append-any" in error.message and event in error.message
    assert detail(stack, row["id"])["title"] == "n"


def test_a_handler_appends_its_own_features_domain_event(stack: Any) -> None:
    appended = stack.http.write_ok(
        "integrity:write:append-any",
        {"event": "integrity:event:note-tagged", "stream_id": "tags-1", "payload": {"tag": "a"}},
        ADMIN,
    )
    assert appended == {"version": 1}


def test_a_domain_event_on_an_entity_stream_takes_the_entitys_stream_type(stack: Any) -> None:
    row = create_note(stack)
    stack.http.write_ok("integrity:write:tag-note", {"id": str(row["id"]), "tag": "x"}, ADMIN)
    assert [e.stream_type for e in stream(stack, row["id"])] == ["integrity:note"] * 2


@pytest.mark.parametrize("on_entity_stream", [True, False])
def test_an_entity_stream_type_is_refused_where_it_does_not_belong(
    stack: Any, on_entity_stream: bool
) -> None:
    row = create_note(stack)
    stream_id, stream_type = (
        (str(row["id"]), "integrity:tags") if on_entity_stream else ("tags-1", "integrity:note")
    )
    with stack.nothing_written(), pytest.raises(ValidationError) as raised:
        stack.service.dispatch_write(
            "integrity:write:append-any",
            {
                "event": "integrity:event:note-tagged",
                "stream_id": stream_id,
                "stream_type": stream_type,
                "payload": {"tag": "a"},
            },
            ADMIN,
        )
    assert [f["path"] for f in raised.value.details["fields"]] == ["stream_type"]


def test_rebuild_applies_only_the_entitys_own_events(stack: Any) -> None:
    row = create_note(stack, title="kept")
    # An event of another entity's type on this stream (as a forger could once append it):
    # rebuild must not read it as a change of the note.
    with stack.db.begin() as conn:
        append_event(
            conn,
            stack.db.backend,
            stack.tables,
            tenant_id=ADMIN.tenant_id,
            stream_id=str(row["id"]),
            stream_type="integrity:note",
            expected_version=1,
            type="integrity:event:handle.updated",
            payload={"changes": {"title": "forged"}},
            metadata={},
            created_by="forger",
        )
    assert rebuild(stack, "integrity:note") == 2
    rebuilt = detail(stack, row["id"])
    assert rebuilt["title"] == "kept"
    assert rebuilt["version"] == 2


# -- ids are scoped by tenant ---------------------------------------------------------------


def test_an_id_taken_in_another_tenant_answers_as_an_unused_id(stack: Any) -> None:
    row_id = str(uuid.uuid4())
    create_note(stack, ADMIN, id=row_id, title="tenant a")
    theirs = stack.http.write_ok(
        f"{NOTE}:create", {"id": row_id, "title": "tenant b"}, OTHER_TENANT
    )
    assert str(theirs["id"]) == row_id
    assert theirs["version"] == 1
    assert detail(stack, row_id, ADMIN)["title"] == "tenant a"
    assert detail(stack, row_id, OTHER_TENANT)["title"] == "tenant b"
    # Taken in the caller's own tenant: a second create of the stream.
    error = stack.http.write_err(f"{NOTE}:create", {"id": row_id, "title": "again"}, OTHER_TENANT)
    assert (error.http_status, error.code) == (409, "version_conflict")
    assert error.details["expected_version"] == 0
    assert error.details["current_version"] == 1
    assert "pkey" not in error.message
    assert rebuild(stack, "integrity:note") == 2
    assert {r["title"] for r in rows_of(stack, "integrity:note")} == {"tenant a", "tenant b"}


# -- the version a reader sees is the stream's ----------------------------------------------


def test_a_domain_event_on_an_entity_stream_moves_the_version_readers_see(stack: Any) -> None:
    row = create_note(stack)
    tagged = stack.http.write_ok("integrity:write:tag-note", {"id": str(row["id"]), "tag": "x"})
    assert tagged == {"version": 2}
    assert detail(stack, row["id"])["version"] == 2
    updated = stack.http.write_ok(
        f"{NOTE}:update", {"id": str(row["id"]), "version": 2, "changes": {"title": "m"}}, ADMIN
    )
    assert updated["version"] == 3
    stack.http.write_ok("integrity:write:tag-note", {"id": str(row["id"]), "tag": "y"})
    stack.http.write_ok(f"{NOTE}:delete", {"id": str(row["id"])}, ADMIN)
    stack.http.write_ok("integrity:write:tag-note", {"id": str(row["id"]), "tag": "z"})
    restored = stack.http.write_ok(f"{NOTE}:restore", {"id": str(row["id"])}, ADMIN)
    assert restored["version"] == 7
    assert [e.version for e in stream(stack, row["id"])] == list(range(1, 8))
    live = rows_of(stack, "integrity:note")
    assert rebuild(stack, "integrity:note") == 7
    assert rows_of(stack, "integrity:note") == live
    forgotten = stack.http.write_ok("integrity:write:forget-note", {"id": str(row["id"])}, ADMIN)
    assert forgotten["version"] == 8


def test_a_stale_version_answers_what_was_sent_and_where_the_stream_is(stack: Any) -> None:
    row = create_note(stack)
    stack.service.dispatch_write(
        "integrity:write:tag-note", {"id": str(row["id"]), "tag": "x"}, ADMIN
    )
    with stack.nothing_written(), pytest.raises(VersionConflictError) as raised:
        stack.service.dispatch_write(
            f"{NOTE}:update", {"id": str(row["id"]), "version": 1, "changes": {"title": "m"}}, ADMIN
        )
    assert raised.value.details["expected_version"] == 1
    assert raised.value.details["current_version"] == 2
    assert raised.value.details["stream_id"] == str(row["id"])


def test_domain_events_and_updates_racing_on_one_entity_stream_all_land(stack: Any) -> None:
    row = create_note(stack)
    racers = 12
    barrier = threading.Barrier(racers)
    failures: list[BaseException] = []

    def race(n: int) -> None:
        barrier.wait()
        try:
            if n % 2:
                stack.service.dispatch_write(
                    "integrity:write:tag-note", {"id": str(row["id"]), "tag": str(n)}, ADMIN
                )
            else:
                stack.service.dispatch_write(
                    "integrity:write:retype-email", {"id": str(row["id"]), "count": 1}, ADMIN
                )
        except BaseException as error:  # collected: a thread's failure must fail the test
            failures.append(error)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert [e.version for e in stream(stack, row["id"])] == list(range(1, racers + 2))
    assert detail(stack, row["id"])["version"] == racers + 1


# -- a unique violation leaves the transaction usable ----------------------------------------


def test_a_handler_that_catches_a_unique_violation_carries_on(stack: Any) -> None:
    first = stack.http.write_ok("integrity:write:claim-handle", {"name": "ada"}, ADMIN)
    assert first["claimed"] is True
    second = stack.http.write_ok("integrity:write:claim-handle", {"name": "ada"}, ADMIN)
    assert second == {"claimed": False}
    assert [r["title"] for r in rows_of(stack, "integrity:note")] == ["lost claim on ada"]
    with stack.db.connect() as conn:
        created = read_events(conn, stack.tables, types=["integrity:event:handle.created"])
    # The losing create's event went with its row: the log and the table agree.
    assert [str(e.stream_id) for e in created] == [first["id"]]
    live = rows_of(stack, "integrity:handle")
    assert rebuild(stack, "integrity:handle") == 1
    assert rows_of(stack, "integrity:handle") == live


def test_a_unique_violation_answers_409_and_persists_nothing(stack: Any) -> None:
    stack.service.dispatch_write(f"{HANDLE}:create", {"name": "ada"}, ADMIN)
    before = stack.row_counts()
    with pytest.raises(ConflictError) as raised:
        stack.service.dispatch_write(f"{HANDLE}:create", {"name": "ada"}, ADMIN)
    assert stack.row_counts() == before
    assert raised.value.reason == "unique_violation"
    assert raised.value.details["entity"] == "integrity:handle"


def test_an_update_onto_a_taken_unique_value_answers_409(stack: Any) -> None:
    stack.service.dispatch_write(f"{HANDLE}:create", {"name": "ada"}, ADMIN)
    bob = stack.service.dispatch_write(f"{HANDLE}:create", {"name": "bob"}, ADMIN)
    error = stack.http.write_err(
        f"{HANDLE}:update", {"id": str(bob["id"]), "version": 1, "changes": {"name": "ada"}}, ADMIN
    )
    assert (error.http_status, error.reason) == (409, "unique_violation")
    assert len(stream(stack, bob["id"])) == 1


# -- forget destroys the row's key: every copy of its values reads as forgotten --------------


def revealed(stack: Any, value: Any) -> Any:
    """``value`` as a reader gets it: its sealed personal values opened."""
    with stack.db.connect() as conn:
        return stack.service.personal.vault(conn).reveal(value)


def test_forget_leaves_every_event_of_a_long_stream_as_it_was(stack: Any) -> None:
    row = create_note(stack, email="first@example.org")
    stack.service.dispatch_write(
        "integrity:write:retype-email", {"id": str(row["id"]), "count": 1050}, ADMIN
    )
    before = stream(stack, row["id"])
    forgotten = stack.http.write_ok("integrity:write:forget-note", {"id": str(row["id"])}, ADMIN)
    assert forgotten["forgotten"] is True
    events = stream(stack, row["id"])
    assert len(events) == 1 + 1050 + 1
    # No stored event changed: the forgotten event was appended, nothing rewritten.
    assert [e.payload for e in events[:-1]] == [e.payload for e in before]
    emails = [
        (e.payload.get("data") or e.payload.get("changes") or {}).get("email") for e in events
    ]
    assert "first@example.org" not in str(emails) and "person-0@" not in str(emails)
    assert {revealed(stack, email) for email in emails[:-1]} == {FORGOTTEN}
    assert events[0].payload["data"]["title"] == "n"


def notes_with_changed_emails(stack: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two notes whose e-mail was updated (a2@..., b2@...): the first to forget, the other
    to keep."""
    row = create_note(stack, email="a@example.org")
    kept = create_note(stack, email="b@example.org")
    for target, email in ((row, "a2@example.org"), (kept, "b2@example.org")):
        stack.service.dispatch_write(
            f"{NOTE}:update",
            {"id": str(target["id"]), "version": 1, "changes": {"email": email}},
            ADMIN,
        )
    return row, kept


def test_job_payloads_of_the_row_hold_its_ciphertext_and_read_forgotten(stack: Any) -> None:
    row, kept = notes_with_changed_emails(stack)
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        stored = conn.execute(select(outbox.c.payload, outbox.c.trigger_result)).all()
    assert "@example.org" not in str(stored)
    stack.http.write_ok("integrity:write:forget-note", {"id": str(row["id"])}, ADMIN)
    payloads = {p["id"]: p for p, _ in stored}
    assert revealed(stack, payloads[str(row["id"])])["changes"]["email"] is FORGOTTEN
    assert revealed(stack, payloads[str(kept["id"])])["changes"]["email"] == "b2@example.org"
    # The update's result, kept on the job row for ctx.trigger.result, is sealed too.
    results = {r["id"]: r for _, r in stored}
    assert revealed(stack, results[str(row["id"])])["email"] is FORGOTTEN
    assert revealed(stack, results[str(kept["id"])])["email"] == "b2@example.org"


def test_jobs_triggered_by_the_rows_events_read_its_values_as_forgotten(stack: Any) -> None:
    row, _kept = notes_with_changed_emails(stack)
    # The job-trigger consumer enqueues "note-event" with each update event's payload.
    stack.consumers.run_once()
    outbox = stack.tables.outbox

    def event_job_emails() -> list[Any]:
        with stack.db.connect() as conn:
            payloads = conn.execute(
                select(outbox.c.payload).where(outbox.c.job_qn == "integrity:job:note-event")
            ).scalars()
            stored = [p["changes"]["email"] for p in payloads]
        assert "@example.org" not in str(stored)
        return sorted(str(revealed(stack, email)) for email in stored)

    assert event_job_emails() == ["a2@example.org", "b2@example.org"]
    stack.http.write_ok("integrity:write:forget-note", {"id": str(row["id"])}, ADMIN)
    assert event_job_emails() == ["[forgotten]", "b2@example.org"]


# -- a pre-save hook's mistake is not the caller's ------------------------------------------


def test_a_pre_save_hook_that_breaks_a_value_is_an_internal_error(stack: Any) -> None:
    with stack.nothing_written(), pytest.raises(InternalError) as raised:
        stack.service.dispatch_write(f"{HANDLE}:create", {"name": "reserved"}, ADMIN)
    error = raised.value
    assert error.http_status == 500
    assert error.reason == "pre_save_hook_failed"
    assert error.details["entity"] == "integrity:handle"
    assert "break_reserved_names" in error.details["hook"]
    assert error.details["fields"][0]["path"] == "name"
