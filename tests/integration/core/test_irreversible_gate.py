"""The irreversible-operation gate: hard delete and forget need a high entry handler."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import event

from asanoha import AccessDeniedError, SessionUser
from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.service import EntityExecutor
from asanoha.platform.store import read_events
from tests.integration.core.conftest import count_rows

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])
GATE = "instructiongate:write"


def make_prompt(core: Any) -> str:
    row = core.service.dispatch_write(
        f"{GATE}:prompt:create", {"label": "doomed", "body": "x"}, ADMIN
    )
    return str(row["id"])


@pytest.mark.parametrize(
    ("handler", "operation"), [("delete-prompt-mid", "delete"), ("forget-prompt-mid", "forget")]
)
@pytest.mark.parametrize("exists", [True, False])
def test_mid_risk_irreversible_operation_is_denied(
    core: Any, handler: str, operation: str, exists: bool
) -> None:
    row_id = make_prompt(core) if exists else str(uuid.uuid4())
    before = count_rows(core)
    with core.capture_writes() as statements, pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_write(f"{GATE}:{handler}", {"id": row_id}, ADMIN)
    error = raised.value
    assert error.http_status == 403
    assert error.reason == "irreversible_operation_requires_high_risk"
    assert error.details["reason"] == "irreversible_operation_requires_high_risk"
    assert error.details["operation"] == operation
    assert error.details["handler"] == f"{GATE}:{handler}"
    assert error.details["resolved_risk"] == "mid"
    assert statements == []
    assert count_rows(core) == before


def test_gate_is_checked_before_any_read(core: Any) -> None:
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(core.db.engine, "before_cursor_execute", record)
    try:
        with pytest.raises(AccessDeniedError):
            core.service.dispatch_write(
                f"{GATE}:forget-prompt-mid", {"id": str(uuid.uuid4())}, ADMIN
            )
    finally:
        event.remove(core.db.engine, "before_cursor_execute", record)
    assert [s for s in statements if "prompts" in s or "asanoha_events" in s] == []


def test_high_risk_hard_delete_and_forget_are_allowed(core: Any) -> None:
    first, second = make_prompt(core), make_prompt(core)
    core.service.dispatch_write(f"{GATE}:delete-prompt-high", {"id": first}, ADMIN)
    core.service.dispatch_write(f"{GATE}:forget-prompt-high", {"id": second}, ADMIN)
    assert count_rows(core)["instructiongate:prompt"] == 0


def test_soft_delete_is_not_gated(core: Any) -> None:
    memo = core.service.dispatch_write(f"{GATE}:create-memo-mid", {"title": "keep"}, ADMIN)
    deleted = core.service.dispatch_write(f"{GATE}:delete-memo-mid", {"id": str(memo["id"])}, ADMIN)
    assert deleted["is_deleted"] is True
    restored = core.service.dispatch_write(f"{GATE}:memo:restore", {"id": str(memo["id"])}, ADMIN)
    assert (restored["is_deleted"], restored["version"]) == (False, 3)


def test_delegation_does_not_inherit_the_target_risk(core: Any) -> None:
    row_id = make_prompt(core)
    before = count_rows(core)
    with pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_write(f"{GATE}:delegate-delete-mid", {"id": row_id}, ADMIN)
    assert raised.value.details["handler"] == f"{GATE}:delegate-delete-mid"
    assert count_rows(core) == before


def test_forget_leaves_earlier_events_holding_only_a_forgotten_value(core: Any) -> None:
    anonymous = SessionUser.anonymous("tenant-a")
    row = core.service.dispatch_write(
        f"{GATE}:submit-contact", {"email": "ann@example.org", "topic": "billing"}, anonymous
    )
    # Called directly (as a job or consumer would), the executor has no entry handler.
    with core.service.unit_of_work(ADMIN) as request:
        executor = EntityExecutor(
            core.service.executor_env,
            request.conn,
            core.registry.entity("instructiongate:contact"),
            ADMIN,
            request,
            None,
        )
        executor.forget(row["id"])
    with core.db.connect() as conn:
        events = read_events(conn, core.tables, stream_id=str(row["id"]))
    assert [e.type.rsplit(".", 1)[1] for e in events] == ["created", "forgotten"]
    # The event was not rewritten: it holds the e-mail sealed under a key that is gone.
    sealed = events[0].payload["data"]["email"]
    assert "ann@example.org" not in sealed
    assert events[0].payload["data"]["topic"] == "billing"
    with core.db.connect() as conn:
        assert core.service.personal.vault(conn).reveal(sealed) is FORGOTTEN
    assert count_rows(core)["instructiongate:contact"] == 0
