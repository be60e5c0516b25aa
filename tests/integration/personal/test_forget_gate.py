"""Forgetting a subject cannot be undone, so it needs a high-risk entry handler on every path.

The bundled ``forget-subject`` handler is high risk itself; a mid-risk handler that reaches it
through ``ctx.write``, or a job that an agent's mid-risk call started and that reaches it
through ``ctx.write_as``, is refused by the operation's own gate: 403 with the gate's reason,
the key intact, nothing written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, AccessDeniedError, Feature, JobContext, WriteContext
from asanoha.handlers import personal_data
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from asanoha.workers.job_context import JobMeta
from tests.integration.personal.features import personal
from tests.integration.personal.test_forget import ALICE

#: May call the bundled handlers (SystemAdmin) and the fixture's own (Admin).
OFFICER = SessionUser.of("officer", TestUsers.admin.tenant_id, ["SystemAdmin", "Admin"])
AGENT = OFFICER.as_agent("tidy-run")
OFFICERS = Access(roles=["SystemAdmin"])

tidy = Feature("tidy")


class Subject(BaseModel):
    subject: str


@tidy.write_handler("tidy-up", access=OFFICERS, description="Tidy a subject's data.")
def tidy_up(payload: Subject, ctx: WriteContext) -> Any:
    """Mid risk, reaching the high-risk forget through a nested write."""
    return ctx.write(
        "personal-data:write:forget-subject", {"subject": payload.subject, "reason": "tidy"}
    )


@tidy.write_handler("ask-tidy", access=OFFICERS, description="Ask for a tidy-up.")
def ask_tidy(payload: Subject, ctx: WriteContext) -> dict[str, str]:
    """Mid risk: it only asks; its job forgets, as a person."""
    return {"subject": payload.subject}


@tidy.job("forget-later", on="tidy:write:ask-tidy")
def forget_later(payload: dict[str, Any], ctx: JobContext) -> None:
    ctx.write_as(
        OFFICER,
        "personal-data:write:forget-subject",
        {"subject": payload["subject"], "reason": "asked"},
    )


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    features = [personal, personal_data.feature, tidy]
    return asanoha_stack(features=features, database=request.param)


def create_alice(stack: Any) -> str:
    row = stack.http.write_ok(
        "personal:write:customer:create",
        {"email": ALICE["email"], "name": ALICE["name"], "plan": "p"},
        TestUsers.admin,
    )
    return str(row["id"])


def key_is_live(stack: Any, subject: str) -> bool:
    keys = stack.tables.subject_keys
    with stack.db.connect() as conn:
        row = conn.execute(keys.select().where(keys.c.subject == subject)).one()
    return row.wrapped_key is not None and row.forgotten_at is None


def job_of_the_write(stack: Any) -> tuple[dict[str, Any], JobContext]:
    """The forget-later job's payload and context, as a worker builds them from its row."""
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        row = conn.execute(select(outbox).where(outbox.c.job_qn == "tidy:job:forget-later")).one()
    job = stack.registry.job("tidy:job:forget-later")
    assert job is not None
    ctx = JobContext(stack.service, job, JobMeta.from_headers(row.headers), task_id="t", retries=0)
    return row.payload, ctx


def test_a_mid_risk_handler_cannot_forget_through_a_nested_write(stack: Any) -> None:
    subject = create_alice(stack)
    with stack.nothing_written():
        refused = stack.http.write_err("tidy:write:tidy-up", {"subject": subject}, OFFICER)
    assert (refused.http_status, refused.code, refused.reason) == (
        403,
        "access_denied",
        "irreversible_operation_requires_high_risk",
    )
    assert refused.details["handler"] == "tidy:write:tidy-up"
    assert refused.details["operation"] == "forget"
    assert refused.details["subject"] == subject
    assert f"the data key of subject {subject}" in refused.message
    assert key_is_live(stack, subject)
    shown = stack.http.query_ok("personal:query:customer:detail", {"id": subject}, TestUsers.admin)
    assert shown["email"] == ALICE["email"]


def test_a_job_of_an_agents_mid_risk_call_cannot_forget_a_subject(stack: Any) -> None:
    subject = create_alice(stack)
    stack.http.write_ok("tidy:write:ask-tidy", {"subject": subject}, AGENT)
    payload, ctx = job_of_the_write(stack)
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        forget_later(payload, ctx)
    assert raised.value.reason == "irreversible_operation_requires_high_risk"
    assert raised.value.details["handler"] == "tidy:write:ask-tidy"
    assert raised.value.details["principal_kind"] == "agent"
    assert key_is_live(stack, subject)


def test_the_same_job_begun_by_a_person_forgets_the_subject(stack: Any) -> None:
    subject = create_alice(stack)
    stack.http.write_ok("tidy:write:ask-tidy", {"subject": subject}, OFFICER)
    payload, ctx = job_of_the_write(stack)
    forget_later(payload, ctx)
    assert not key_is_live(stack, subject)
