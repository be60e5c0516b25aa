"""A job that fails says why: drain()'s ``JobFailedError`` and the stored run row carry what
is wrong (each invalid field, the missing ``version=``), not only that something failed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from asanoha.platform.model import Access, Entity, Feature, SessionUser, fields
from asanoha.workers import JobFailedError
from tests.integration.workers.conftest import job_runs

ADMIN = SessionUser.of("admin-1", "default", ["Admin"])
WRITERS = Access(roles=["Admin", "system"])


class Notify(BaseModel):
    id: str
    note: str


def desk_feature() -> Feature:
    feature = Feature("desk")
    record = Entity(table="desk_records", fields={"note": fields.text(personal=False, reason="t")})
    feature.crud("record", record, write=WRITERS, read=WRITERS)

    @feature.write_handler("record-notify", access=WRITERS)
    def record_notify(payload: Notify, ctx: Any) -> Any:
        # The version the row was read at is left out.
        return ctx.entity("record").update(payload.id, {"note": payload.note})

    @feature.job("notify", manual=True)
    def notify(payload: dict[str, Any], ctx: Any) -> None:
        ctx.write("desk:write:record-notify", payload)

    return feature


@pytest.fixture
def stack(jobs_stack: Any) -> Any:
    return jobs_stack([desk_feature()])


def failure_of(stack: Any, payload: dict[str, Any]) -> str:
    """The error drain() reports for one run of desk:job:notify; the run row stores the same."""
    stack.dispatch_job("desk:job:notify", payload)
    with pytest.raises(JobFailedError) as raised:
        stack.drain()
    (failure,) = raised.value.failures
    assert failure.error in str(raised.value)
    (run,) = [run for run in job_runs(stack, "desk:job:notify") if run.status == "failed"]
    assert run.error == failure.error
    return str(failure.error)


def test_an_update_without_a_version_fails_saying_the_version_is_missing(stack: Any) -> None:
    row = stack.service.dispatch_write("desk:write:record:create", {"note": "first"}, ADMIN)
    error = failure_of(stack, {"id": str(row["id"]), "note": "second"})
    assert error.startswith(
        "TypeError: update() of desk:record needs version=<the row's current version>"
    )
    assert "skip_optimistic_lock=True" in error


def test_a_payload_that_fails_validation_names_each_field_and_its_problem(stack: Any) -> None:
    error = failure_of(stack, {"id": 7})
    assert error.startswith("ValidationError: The payload of desk:write:record-notify failed")
    assert "reason: validation_failed" in error
    assert "id: Input should be a valid string (string_type)" in error
    assert "note: Field required (missing)" in error
