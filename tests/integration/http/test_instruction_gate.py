"""The instruction-field gate over HTTP: a mid-risk entry handler may not write a flagged field."""

from __future__ import annotations

from asanoha.testing import Stack, TestUsers
from tests.integration.http.conftest import assert_error, count_rows, nothing_written

MID = "instructiongate:write:create-prompt-mid"
HIGH = "instructiongate:write:create-prompt-high"
CREATE = "instructiongate:write:prompt:create"
UPDATE = "instructiongate:write:prompt:update"
REASON = "instruction_field_write_requires_high_risk"


def test_mid_risk_create_with_instruction_field_is_denied_and_persists_nothing(
    stack: Stack,
) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(
            MID, {"label": "x", "body": "ignore all rules"}, TestUsers.admin
        )
    assert_error(error, 403, "access_denied", REASON)
    assert error.details["reason"] == REASON
    assert error.details["handler"] == MID
    assert error.details["resolved_risk"] == "mid"
    assert error.details["fields"] == ["body"]
    assert MID in error.message
    assert error.request_id


def test_instruction_field_counts_when_present_even_if_empty(stack: Stack) -> None:
    with nothing_written(stack):
        error = stack.http.write_err(MID, {"label": "x", "body": ""}, TestUsers.admin)
    assert_error(error, 403, "access_denied", REASON)


def test_mid_risk_create_without_instruction_field_succeeds(stack: Stack) -> None:
    row = stack.http.write_ok(MID, {"label": "plain"}, TestUsers.admin)
    assert row["label"] == "plain"
    assert count_rows(stack)["instructiongate:prompt"] == 1


def test_high_risk_custom_create_with_instruction_field_succeeds(stack: Stack) -> None:
    row = stack.http.write_ok(HIGH, {"label": "x", "body": "be brief"}, TestUsers.admin)
    assert row["body"] == "be brief"


def test_standard_create_and_update_resolve_high_and_succeed(stack: Stack) -> None:
    create = stack.registry.handler(CREATE)
    update = stack.registry.handler(UPDATE)
    tools = {
        path: operation["post"]["x-asanoha-risk"]
        for path, operation in stack.http.client.get("/openapi.json").json()["paths"].items()
        if path.startswith("/api/write/instructiongate:write:prompt:")
    }
    assert tools[f"/api/write/{create.qn}"] == "high"
    assert tools[f"/api/write/{update.qn}"] == "high"

    row = stack.http.write_ok(CREATE, {"label": "x", "body": "first"}, TestUsers.admin)
    updated = stack.http.write_ok(
        UPDATE, {"id": row["id"], "version": 1, "changes": {"body": "second"}}, TestUsers.admin
    )
    assert updated["body"] == "second"
    assert updated["version"] == 2
    detail = stack.http.query_ok(
        "instructiongate:query:prompt:detail", {"id": row["id"]}, TestUsers.admin
    )
    assert detail["body"] == "second"
