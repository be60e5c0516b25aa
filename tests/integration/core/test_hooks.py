"""Entity hooks: validate, pre_delete, post_delete and after_commit."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from asanoha import AccessDeniedError, ConflictError, StoredEvent, ValidationError
from asanoha.testing import TestUsers
from tests.integration.core import contract_features
from tests.integration.core.contract_features import contracts

ADMIN = TestUsers.admin
TICKET = "contracts:write:ticket"


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Iterator[Any]:
    for seen in (
        contract_features.VALIDATED,
        contract_features.DELETED,
        contract_features.COMMITTED,
        contract_features.AFTER_COMMIT_PROBE,
    ):
        seen.clear()
    yield asanoha_stack(features=[contracts], database=request.param)
    contract_features.AFTER_COMMIT_PROBE.clear()


def create(stack: Any, title: str) -> Any:
    return stack.service.dispatch_write(f"{TICKET}:create", {"title": title}, ADMIN)


def test_validate_sees_the_data_after_defaults_and_refuses_with_field_paths(stack: Any) -> None:
    create(stack, "fine")
    assert contract_features.VALIDATED == [{"title": "fine", "priority": "normal"}]
    with stack.nothing_written(), pytest.raises(ValidationError) as raised:
        create(stack, "bad")
    assert raised.value.details["fields"] == [
        {"path": "title", "type": "refused", "message": "'bad' is no title"}
    ]
    assert raised.value.details["handler"] == f"{TICKET}:create"


def test_validate_runs_on_update_and_before_any_gate(stack: Any) -> None:
    row = create(stack, "fine")
    payload = {"id": str(row["id"]), "version": 1, "changes": {"title": "bad"}}
    with stack.nothing_written(), pytest.raises(ValidationError):
        stack.service.dispatch_write(f"{TICKET}:update", payload, ADMIN)
    # The mid-risk handler writes an instruction field: the gate would answer 403, but the
    # validate hook refuses first.
    with stack.nothing_written(), pytest.raises(ValidationError):
        stack.service.dispatch_write("contracts:write:note-ticket", {"title": "bad"}, ADMIN)
    with stack.nothing_written(), pytest.raises(AccessDeniedError):
        stack.service.dispatch_write("contracts:write:note-ticket", {"title": "ok"}, ADMIN)


def test_pre_delete_may_refuse_a_delete_and_post_delete_runs_in_its_transaction(
    stack: Any,
) -> None:
    kept = create(stack, "keep")
    with stack.nothing_written(), pytest.raises(ConflictError):
        stack.service.dispatch_write(f"{TICKET}:delete", {"id": str(kept["id"])}, ADMIN)
    gone = create(stack, "gone")
    stack.service.dispatch_write(f"{TICKET}:delete", {"id": str(gone["id"])}, ADMIN)
    assert [str(gone["id"])] == contract_features.DELETED
    failing = create(stack, "fail-after-delete")
    before = stack.row_counts()
    with pytest.raises(RuntimeError, match="post_delete refuses"):
        stack.service.dispatch_write(f"{TICKET}:delete", {"id": str(failing["id"])}, ADMIN)
    assert stack.row_counts() == before


def test_after_commit_runs_once_the_write_is_visible_to_others(stack: Any) -> None:
    seen_committed: list[bool] = []

    def probe(event: StoredEvent) -> None:
        table = stack.tables.entity("contracts:ticket")
        with stack.db.connect() as conn:
            row_id = uuid.UUID(event.stream_id)
            found = conn.execute(select(table.c.id).where(table.c.id == row_id))
            seen_committed.append(found.first() is not None)

    contract_features.AFTER_COMMIT_PROBE.append(probe)
    row = create(stack, "fine")
    assert seen_committed == [True]
    (event,) = contract_features.COMMITTED
    assert (event.stream_id, event.type) == (str(row["id"]), "contracts:event:ticket.created")


def test_after_commit_does_not_run_for_a_refused_write(stack: Any) -> None:
    with pytest.raises(ValidationError):
        create(stack, "bad")
    assert contract_features.COMMITTED == []


def test_a_failing_after_commit_hook_is_logged_and_counted_not_answered(
    stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    labels = {"entity": "contracts:ticket"}
    metric = "asanoha_after_commit_hook_failures_total"
    before = REGISTRY.get_sample_value(metric, labels) or 0.0
    with caplog.at_level(logging.ERROR, logger="asanoha.service"):
        row = create(stack, "explode")
    assert row["title"] == "explode"
    assert stack.row_counts()["contracts:ticket"] == 1
    assert REGISTRY.get_sample_value(metric, labels) == before + 1
    assert "after_commit hook" in caplog.text
    assert "after_commit fails" in caplog.text
