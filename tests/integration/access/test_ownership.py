"""Row ownership: a caller confined by owner= sees and changes only its own rows; another's
row is answered as a missing one and nothing is written."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest

from asanoha import AccessDeniedError, NotFoundError
from asanoha.platform.model import SessionUser
from asanoha.testing import Stack
from tests.integration.access.features import ALICE, AUDITOR, BOB, TENANT

NOTE = "owned:{kind}:note:{verb}"


def qn(kind: str, verb: str) -> str:
    return NOTE.format(kind=kind, verb=verb)


def _alices_note(stack: Stack) -> dict[str, object]:
    row: dict[str, object] = stack.http.write_ok(qn("write", "create"), {"title": "mine"}, ALICE)
    return row


def test_another_callers_list_and_detail_show_nothing_of_the_row(stack: Stack) -> None:
    row = _alices_note(stack)
    stack.http.write_ok(qn("write", "create"), {"title": "bobs"}, BOB)
    listed = stack.http.query_ok(qn("query", "list"), {"with_total": True}, BOB)
    assert [r["title"] for r in listed["rows"]] == ["bobs"]
    assert listed["total"] == 1
    missing = stack.http.query_err(qn("query", "detail"), {"id": row["id"]}, BOB)
    assert (missing.http_status, missing.reason) == (404, "entity_not_found")
    assert stack.http.query_ok(qn("query", "detail"), {"id": row["id"]}, ALICE)["title"] == "mine"


def test_update_delete_and_restore_of_another_callers_row_answer_404_and_write_nothing(
    stack: Stack,
) -> None:
    row = _alices_note(stack)
    never = {"id": str(uuid.uuid4())}
    with stack.nothing_written():
        update = stack.http.write_err(
            qn("write", "update"),
            {"id": row["id"], "version": row["version"], "changes": {"title": "bobs now"}},
            BOB,
        )
        delete = stack.http.write_err(qn("write", "delete"), {"id": row["id"]}, BOB)
        unknown = stack.http.write_err(qn("write", "delete"), never, BOB)
    for refused in (update, delete):
        assert (refused.http_status, refused.reason) == (404, "entity_not_found")
        # The same answer as for a row that does not exist: nothing tells that it does.
        assert refused.details.keys() == unknown.details.keys()
    stack.http.write_ok(qn("write", "delete"), {"id": row["id"]}, ALICE)
    with stack.nothing_written():
        restore = stack.http.write_err(qn("write", "restore"), {"id": row["id"]}, BOB)
    assert (restore.http_status, restore.reason) == (404, "entity_not_found")
    stack.http.write_ok(qn("write", "restore"), {"id": row["id"]}, ALICE)


def test_forget_of_another_callers_row_answers_404_and_writes_nothing(stack: Stack) -> None:
    row = _alices_note(stack)
    service = stack.service
    with stack.nothing_written(), pytest.raises(NotFoundError), service.unit_of_work(BOB) as unit:
        service.executor(unit, "note", BOB, feature="owned", caller="test").forget(row["id"])


def test_a_bypass_role_sees_and_changes_every_row(stack: Stack) -> None:
    row = _alices_note(stack)
    stack.http.write_ok(qn("write", "create"), {"title": "bobs"}, BOB)
    listed = stack.http.query_ok(qn("query", "list"), {"sort": ["title"]}, AUDITOR)
    assert [r["title"] for r in listed["rows"]] == ["bobs", "mine"]
    changed = stack.http.write_ok(
        qn("write", "update"),
        {"id": row["id"], "version": row["version"], "changes": {"title": "audited"}},
        AUDITOR,
    )
    assert changed["title"] == "audited"


def test_a_custom_handler_reaches_the_rows_under_the_same_rule(stack: Stack) -> None:
    row = _alices_note(stack)
    with stack.nothing_written():
        refused = stack.http.write_err(
            "owned:write:rename-note", {"id": row["id"], "title": "x"}, BOB
        )
    assert (refused.http_status, refused.reason) == (404, "entity_not_found")
    assert stack.http.query_ok("owned:query:peek-note", {"id": row["id"]}, BOB) is None
    renamed = stack.http.write_ok("owned:write:rename-note", {"id": row["id"], "title": "y"}, ALICE)
    assert renamed["title"] == "y"


def test_the_system_user_is_confined_like_any_caller(stack: Stack) -> None:
    _alices_note(stack)
    listed = stack.service.dispatch_query(qn("query", "list"), {}, AUDITOR)
    assert len(listed["rows"]) == 1
    with stack.service.unit_of_work(SessionUser.system(TENANT)) as unit:
        reader = stack.service.reader(unit, "note", unit.user, feature="owned", caller="test")
        assert reader.list()["rows"] == []


def test_an_owner_field_holding_the_user_id_confines_list_and_writes(stack: Stack) -> None:
    mine = stack.http.write_ok("owned:write:ticket:create", {"title": "a"}, ALICE)
    # Left out, the owner field is filled in with the caller's id.
    assert mine["holder"] == "alice"
    stack.http.write_ok("owned:write:ticket:create", {"holder": "bob", "title": "b"}, BOB)
    listed = stack.http.query_ok("owned:query:ticket:list", {}, BOB)
    assert [r["title"] for r in listed["rows"]] == ["b"]
    with stack.nothing_written():
        refused = stack.http.write_err("owned:write:ticket:delete", {"id": mine["id"]}, BOB)
    assert refused.reason == "entity_not_found"


def test_a_confined_caller_sets_an_owner_field_only_to_itself(stack: Stack) -> None:
    mine = stack.http.write_ok("owned:write:ticket:create", {"title": "a"}, ALICE)
    handover = {"id": mine["id"], "version": 1, "changes": {"holder": "bob"}}
    with stack.nothing_written():
        planted = stack.http.write_err(
            "owned:write:ticket:create", {"holder": "bob", "title": "b"}, ALICE
        )
        handed = stack.http.write_err("owned:write:ticket:update", handover, ALICE)
        orphaned = stack.http.write_err(
            "owned:write:ticket:update",
            {"id": mine["id"], "version": 1, "changes": {"holder": None}},
            ALICE,
            headers={"Accept-Language": "de"},
        )
    for refused in (planted, handed, orphaned):
        assert (refused.http_status, refused.reason) == (403, "owner_field_write_denied")
        assert refused.details["fields"] == ["holder"]
    assert orphaned.user_message == "Sie können diesen Eintrag nur als Ihren eigenen führen."
    stack.http.write_ok(
        "owned:write:ticket:update",
        {"id": mine["id"], "version": 1, "changes": {"holder": "alice", "title": "kept"}},
        ALICE,
    )


def test_a_reference_owner_field_compares_the_user_id_as_a_uuid(stack: Stack) -> None:
    holder = uuid.uuid4()
    owner = SessionUser.of(str(holder), TENANT, ["Staff"])
    # The row the reference names (a reference names a live row of the tenant).
    stack.http.write_ok("owned:write:note:create", {"id": str(holder), "title": "n"}, owner)
    stack.http.write_ok("owned:write:card:create", {"holder": str(holder), "title": "c"}, owner)
    assert len(stack.http.query_ok("owned:query:card:list", {}, owner)["rows"]) == 1
    # A user id that is no UUID owns no row of a reference owner.
    assert stack.http.query_ok("owned:query:card:list", {}, ALICE)["rows"] == []


def test_a_function_owner_is_asked_for_every_row(stack: Stack) -> None:
    shared = stack.http.write_ok("owned:write:memo:create", {"title": "alice bob"}, ALICE)
    alone = stack.http.write_ok("owned:write:memo:create", {"title": "alice"}, ALICE)
    listed = stack.http.query_ok("owned:query:memo:list", {"with_total": True}, BOB)
    assert [r["id"] for r in listed["rows"]] == [shared["id"]]
    assert listed["total"] == 1
    assert stack.http.query_err("owned:query:memo:detail", {"id": alone["id"]}, BOB).reason == (
        "entity_not_found"
    )
    with stack.nothing_written():
        refused = stack.http.write_err("owned:write:memo:delete", {"id": alone["id"]}, BOB)
    assert refused.reason == "entity_not_found"
    stack.http.write_ok("owned:write:memo:delete", {"id": shared["id"]}, BOB)


def test_a_function_owner_list_reads_on_to_full_pages_whose_cursors_name_owned_rows(
    stack: Stack,
) -> None:
    titles = ["alice bob" if i % 4 == 3 else "alice" for i in range(14)]
    rows = [stack.http.write_ok("owned:write:memo:create", {"title": t}, ALICE) for t in titles]
    bobs = {row["id"] for row in rows if "bob" in row["title"]}
    seen: list[str] = []
    cursor = None
    while True:
        payload = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = stack.http.query_ok("owned:query:memo:list", payload, BOB)
        seen += [row["id"] for row in page["rows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(page["rows"]) == 2
        body = base64.urlsafe_b64decode(cursor.partition(".")[0] + "==")
        assert json.loads(body)["k"][-1] in bobs
    assert sorted(seen) == sorted(bobs) and len(seen) == 3


def test_an_agents_approval_request_tells_nothing_of_a_row_it_does_not_own(
    stack: Stack,
) -> None:
    service = stack.service
    row = service.dispatch_write(
        "owned:write:brief:create", {"body": "old body", "secret": "old secret"}, ALICE
    )
    update = "owned:write:brief:update"
    changes = {"body": "new body", "secret": "new secret"}
    agent_of_bob = BOB.as_agent("run-b")
    with stack.nothing_written():
        for row_id in (row["id"], uuid.uuid4()):
            with pytest.raises(NotFoundError) as refused:
                payload = {"id": row_id, "version": 1, "changes": changes}
                service.dispatch_write(update, payload, agent_of_bob)
            assert refused.value.reason == "entity_not_found"
    with pytest.raises(AccessDeniedError) as asked:
        payload = {"id": row["id"], "version": 1, "changes": changes}
        service.dispatch_write(update, payload, ALICE.as_agent("run-a"))
    details = asked.value.details
    assert details["reason"] == "agent.approval_required"
    old = {change["field"]: change["old"] for change in details["changes"]}
    # Alice reads body but not secret (HR only): its old text is not shown to her agent.
    assert old == {"body": "old body", "secret": None}
    assert "old secret" not in str(details)


def test_a_domain_event_on_another_callers_row_answers_404_and_writes_nothing(
    stack: Stack,
) -> None:
    row = _alices_note(stack)
    with stack.nothing_written():
        refused = stack.http.write_err("owned:write:flag-note", {"id": row["id"]}, BOB)
    assert (refused.http_status, refused.reason) == (404, "entity_not_found")
    assert stack.http.write_ok("owned:write:flag-note", {"id": row["id"]}, ALICE) == 2
    assert stack.http.write_ok("owned:write:flag-note", {"id": row["id"]}, AUDITOR) == 3


def _approval_of(
    stack: Stack, handler: str, payload: dict[str, Any], approver: SessionUser, principal: str
) -> httpx.Response:
    """The raw answer to ``approver`` approving ``principal``'s call of ``handler``."""
    asked = {"handler": handler, "payload": payload, "principal": principal, "channel": "test"}
    return stack.http.write("agent:write:approve", asked, approver)


def test_an_approver_naming_the_rows_owner_is_told_nothing_of_a_row_it_does_not_own(
    stack: Stack,
) -> None:
    """The approver's own reach decides, not the principal it names: Bob naming Alice (whose
    row it is) is answered as for a missing row, as his own update would be."""
    row = stack.service.dispatch_write(
        "owned:write:brief:create", {"body": "old body", "secret": "old secret"}, ALICE
    )
    payload = {"id": str(row["id"]), "version": 1, "changes": {"body": "new body"}}
    with stack.nothing_written():
        response = _approval_of(stack, "owned:write:brief:update", payload, BOB, ALICE.id)
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["code"], error["reason"]) == ("not_found", "entity_not_found")
    assert "old body" not in response.text and "old secret" not in response.text


def test_an_approver_who_may_change_but_not_read_a_row_is_shown_none_of_its_text(
    stack: Stack,
) -> None:
    row = stack.service.dispatch_write("owned:write:draft:create", {"body": "old body"}, ALICE)
    payload = {"id": str(row["id"]), "version": 1, "changes": {"body": "new body"}}
    response = _approval_of(stack, "owned:write:draft:update", payload, BOB, ALICE.id)
    assert response.status_code == 200, response.text
    assert "new body" in response.json()["data"]["summary"]
    assert "old body" not in response.text


def test_an_approver_who_owns_the_row_is_shown_the_fields_it_reads(stack: Stack) -> None:
    row = stack.service.dispatch_write(
        "owned:write:brief:create", {"body": "old body", "secret": "old secret"}, ALICE
    )
    changes = {"body": "new body", "secret": "new secret"}
    payload = {"id": str(row["id"]), "version": 1, "changes": changes}
    response = _approval_of(stack, "owned:write:brief:update", payload, ALICE, "alices-agent")
    assert response.status_code == 200, response.text
    approval = response.json()["data"]
    assert approval["token"]
    assert "'old body' -> 'new body'" in approval["summary"]
    # Alice reads body but not secret (HR only): none of its old text, whoever the agent is.
    assert "old secret" not in response.text
