"""``keep_result=True``: a job's return value is stored sealed when it succeeds and read by
``app.jobs.result(job_id, timeout=)``; a failed job raises, an unknown one answers 404, a job
that keeps no result says so, and forget erases a kept personal value."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.platform.errors import NotFoundError
from asanoha.platform.model import Feature
from asanoha.platform.personal import FORGOTTEN
from asanoha.platform.service.erasure import forget_subject
from asanoha.platform.service.jobs import JobNotSucceededError
from asanoha.testing import TestUsers
from tests.integration.personal.features import personal
from tests.integration.personal.scan import hits
from tests.integration.personal.test_forget import ALICE


def _features(*, personal_trigger: bool = False) -> Feature:
    reports = Feature("reports")

    @reports.job("total", manual=True, keep_result=True)
    def total(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"total": sum(payload["values"])}

    @reports.job("broken", manual=True, keep_result=True, retries=0)
    def broken(payload: dict[str, Any], ctx: Any) -> Any:
        if payload.get("set"):
            return {1, 2}  # not JSON: the attempt fails, naming the job
        raise RuntimeError("the ledger is closed")

    @reports.job("quiet", manual=True)
    def quiet(payload: dict[str, Any], ctx: Any) -> int:
        return 1

    if personal_trigger:

        @reports.job("address", on="personal:write:customer:create", keep_result=True)
        def address(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
            return {"to": ctx.trigger.result["email"]}

    return reports


def _kept(stack: Any) -> int:
    results = stack.tables.job_results
    with stack.db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(results)).scalar_one())


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_kept_result_is_read_once_the_job_succeeds(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(features=[_features()], jobs=True, database=database)
    job_id = stack.dispatch_job("reports:job:total", {"values": [1, 2, 3]})
    assert stack.app.jobs.result(job_id, timeout=30) == {"total": 6}
    assert stack.app.jobs.result(str(job_id)) == {"total": 6}

    failed = stack.dispatch_job("reports:job:broken", {})
    with pytest.raises(JobNotSucceededError, match="the ledger is closed") as raised:
        stack.app.jobs.result(failed, timeout=30)
    assert raised.value.state == "failed"
    not_json = stack.dispatch_job("reports:job:broken", {"set": True})
    with pytest.raises(JobNotSucceededError, match="reports:job:broken returned a result"):
        stack.app.jobs.result(not_json, timeout=30)
    # Only the succeeded row keeps a result.
    assert _kept(stack) == 1

    quiet = stack.dispatch_job("reports:job:quiet", {})
    with pytest.raises(ValueError, match="keep_result=True"):
        stack.app.jobs.result(quiet, timeout=30)
    with pytest.raises(NotFoundError):
        stack.app.jobs.result(uuid.uuid4(), timeout=1)


@pytest.mark.parametrize("database", ["sqlite"])
def test_waiting_for_a_result_times_out_while_the_job_is_pending(
    asanoha_stack: Any, database: str
) -> None:
    stack = asanoha_stack(features=[_features()], jobs=True, database=database)
    job_id = stack.dispatch_job("reports:job:total", {"values": [1]}, delay=3600)
    with pytest.raises(TimeoutError, match="pending"):
        stack.app.jobs.result(job_id, timeout=0.2)


@pytest.mark.parametrize("database", ["postgres"])
def test_a_kept_personal_value_is_sealed_and_forgotten(asanoha_stack: Any, database: str) -> None:
    stack = asanoha_stack(
        features=[personal, _features(personal_trigger=True)], jobs=True, database=database
    )
    created = stack.http.write_ok(
        "personal:write:customer:create",
        {"email": ALICE["email"], "name": ALICE["name"], "plan": "p"},
        TestUsers.admin,
    )
    stack.drain()
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        job_id = conn.execute(
            select(outbox.c.id).where(outbox.c.job_qn == "reports:job:address")
        ).scalar_one()
    assert stack.app.jobs.result(job_id) == {"to": ALICE["email"]}
    assert hits(stack, [ALICE["email"]]) == []
    with stack.service.unit_of_work(TestUsers.admin) as request:
        forget_subject(
            request,
            stack.service.personal,
            tenant_id=TestUsers.admin.tenant_id,
            subject=str(created["id"]),
            by="test",
            reason="erasure request",
        )
    assert stack.app.jobs.result(job_id) == {"to": FORGOTTEN}
