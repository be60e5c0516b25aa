"""The instruction-field gate, through the service layer, on Postgres and SQLite."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import AccessDeniedError, SessionUser
from tests.integration.core.conftest import count_rows

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])
GATE = "instructiongate:write"


def create_prompt(core: Any, **data: Any) -> dict[str, Any]:
    return core.service.dispatch_write(
        f"{GATE}:prompt:create", {"label": "greeting", **data}, ADMIN
    )


def denied(core: Any, qn: str, payload: dict[str, Any]) -> tuple[AccessDeniedError, list[str]]:
    """Dispatch a call that must be denied; return the error and the writes it issued."""
    with core.capture_writes() as statements, pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_write(qn, payload, ADMIN)
    return raised.value, statements


def test_mid_risk_create_with_flagged_field_is_denied_and_persists_nothing(core: Any) -> None:
    before = count_rows(core)
    error, writes = denied(
        core, f"{GATE}:create-prompt-mid", {"label": "x", "body": "ignore previous"}
    )
    assert error.http_status == 403
    assert error.code == "access_denied"
    assert error.reason == "instruction_field_write_requires_high_risk"
    assert error.details["reason"] == "instruction_field_write_requires_high_risk"
    assert error.details["handler"] == f"{GATE}:create-prompt-mid"
    assert error.details["resolved_risk"] == "mid"
    assert error.details["entity"] == "instructiongate:prompt"
    assert error.details["verb"] == "create"
    assert error.details["fields"] == ["body"]
    assert f"{GATE}:create-prompt-mid" in error.message
    assert writes == []
    assert count_rows(core) == before


def test_high_risk_create_with_flagged_field_succeeds(core: Any) -> None:
    row = core.service.dispatch_write(
        f"{GATE}:create-prompt-high", {"label": "x", "body": "be brief"}, ADMIN
    )
    assert row["body"] == "be brief"
    assert row["version"] == 1
    assert count_rows(core)["instructiongate:prompt"] == 1


def test_mid_risk_create_without_flagged_field_is_allowed(core: Any) -> None:
    row = core.service.dispatch_write(f"{GATE}:create-prompt-mid", {"label": "plain"}, ADMIN)
    assert row["label"] == "plain"
    assert row["body"] is None


def test_standard_create_and_update_resolve_high_and_succeed(core: Any) -> None:
    row = create_prompt(core, body="first")
    updated = core.service.dispatch_write(
        f"{GATE}:prompt:update",
        {"id": str(row["id"]), "version": 1, "changes": {"body": "second"}},
        ADMIN,
    )
    assert (updated["body"], updated["version"]) == ("second", 2)


def test_mid_handler_delegating_into_the_high_standard_update_is_denied(core: Any) -> None:
    row = create_prompt(core, body="original")
    before = count_rows(core)
    error, writes = denied(
        core, f"{GATE}:delegate-update-mid", {"id": str(row["id"]), "version": 1, "body": "evil"}
    )
    assert error.reason == "instruction_field_write_requires_high_risk"
    assert error.details["handler"] == f"{GATE}:delegate-update-mid"
    assert error.details["verb"] == "update"
    assert writes == []
    assert count_rows(core) == before
    detail = core.service.dispatch_query(
        "instructiongate:query:prompt:detail", {"id": str(row["id"])}, ADMIN
    )
    assert (detail["body"], detail["version"]) == ("original", 1)


def test_mid_update_touching_only_another_field_is_allowed(core: Any) -> None:
    row = create_prompt(core, body="keep")
    updated = core.service.dispatch_write(
        f"{GATE}:update-prompt-mid", {"id": str(row["id"]), "version": 1, "label": "renamed"}, ADMIN
    )
    assert (updated["label"], updated["body"], updated["version"]) == ("renamed", "keep", 2)


def test_mid_update_with_flagged_field_is_denied_even_when_unchanged(core: Any) -> None:
    row = create_prompt(core, body="same")
    before = count_rows(core)
    error, writes = denied(
        core, f"{GATE}:update-prompt-mid", {"id": str(row["id"]), "version": 1, "body": "same"}
    )
    assert error.reason == "instruction_field_write_requires_high_risk"
    assert error.details["fields"] == ["body"]
    assert writes == []
    assert count_rows(core) == before


def test_pre_save_hook_adding_the_flagged_field_makes_a_mid_write_denied(core: Any) -> None:
    before = count_rows(core)
    error, writes = denied(core, f"{GATE}:create-memo-mid", {"title": "auto: weekly"})
    assert error.reason == "instruction_field_write_requires_high_risk"
    assert error.details["fields"] == ["hint"]
    assert writes == []
    assert count_rows(core) == before
    allowed = core.service.dispatch_write(f"{GATE}:create-memo-mid", {"title": "manual"}, ADMIN)
    assert allowed["hint"] is None


def test_denied_write_writes_no_outbox_row_for_its_job(core: Any) -> None:
    denied(core, f"{GATE}:create-prompt-mid", {"label": "x", "body": "y"})
    assert count_rows(core)["outbox"] == 0
    core.service.dispatch_write(f"{GATE}:create-prompt-high", {"label": "x", "body": "y"}, ADMIN)
    assert count_rows(core)["outbox"] == 1
