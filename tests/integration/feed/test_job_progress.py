"""Job progress and ends on the feed: ``ctx.progress`` in a job, and the end of each attempt
on its row, reach the user who started it and the tenant's operators, no one else."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asanoha.platform.errors import ValidationError
from asanoha.platform.service.platform_events import append_job_progress
from asanoha.testing import Stack, TestUsers
from tests.integration.feed.conftest import Served, serve
from tests.integration.feed.features import crm, reports
from tests.integration.feed.sse_client import open_stream

ADMIN, USER, OPERATOR = TestUsers.admin, TestUsers.user, TestUsers.system_admin
JOBS = {"types": "asanoha:job.*"}
PROGRESS = {"types": "asanoha:job.progress"}


@pytest.fixture
def with_jobs(asanoha_stack: Callable[..., Any]) -> Iterator[Served]:
    stack: Stack = asanoha_stack(features=[crm, reports], jobs=True)
    yield from serve(stack)


def test_progress_reaches_the_jobs_owner_and_the_operators(with_jobs: Served) -> None:
    served, stack = with_jobs, with_jobs.stack
    with (
        open_stream(served.base_url, served.token(ADMIN), PROGRESS) as admin,
        open_stream(served.base_url, served.token(USER), PROGRESS) as user,
        open_stream(served.base_url, served.token(OPERATOR), PROGRESS) as operator,
    ):
        for stream in (admin, user, operator):
            stream.read_until(lambda s: b"retry:" in s.raw)
        stack.http.write_ok("crm:write:ticket:create", {"title": "by the admin"}, ADMIN)
        stack.drain()
        stack.http.write_ok("crm:write:ticket:create", {"title": "by the user"}, USER)
        stack.drain()
        admin.read_until(lambda s: len(s.events) == 2)
        user.read_until(lambda s: len(s.events) == 2)
        operator.read_until(lambda s: len(s.events) == 4)
    admins_job = {m.json["streamId"] for m in admin.events}
    users_job = {m.json["streamId"] for m in user.events}
    assert len(admins_job) == len(users_job) == 1 and admins_job != users_job
    # Sent in id order: the user's stream passed the admin's job without showing it.
    assert next(iter(admins_job)).encode() not in bytes(user.raw)
    assert [m.json["payload"] for m in admin.events] == [
        {"job": "reports:job:summarize", "fraction": 0.5, "message": "half way"},
        {"job": "reports:job:summarize", "fraction": 1.0, "message": None},
    ]
    assert {m.json["type"] for m in operator.events} == {"asanoha:job.progress"}
    assert {m.json["streamId"] for m in operator.events} == admins_job | users_job


def test_a_jobs_end_follows_its_progress_for_its_owner_only(with_jobs: Served) -> None:
    served, stack = with_jobs, with_jobs.stack
    ended = "asanoha:job.succeeded"
    with (
        open_stream(served.base_url, served.token(ADMIN), JOBS) as admin,
        open_stream(served.base_url, served.token(USER), JOBS) as user,
    ):
        for stream in (admin, user):
            stream.read_until(lambda s: b"retry:" in s.raw)
        stack.http.write_ok("crm:write:ticket:create", {"title": "by the admin"}, ADMIN)
        stack.drain()
        stack.http.write_ok("crm:write:ticket:create", {"title": "by the user"}, USER)
        stack.drain()
        admin.read_until(lambda s: any(m.json["type"] == ended for m in s.events))
        user.read_until(lambda s: any(m.json["type"] == ended for m in s.events))
    assert [m.json["type"] for m in admin.events] == [
        "asanoha:job.progress",
        "asanoha:job.progress",
        ended,
    ]
    [end] = [m.json for m in admin.events if m.json["type"] == ended]
    assert end["payload"] == {"job": "reports:job:summarize", "attempt": 1, "status": "succeeded"}
    assert end["streamType"] == "asanoha:job" and end["version"] == 3
    # The user's stream passed the admin's job without showing any event of it.
    assert end["streamId"].encode() not in bytes(user.raw)
    assert [m.json["type"] for m in user.events][-1] == ended


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_a_fraction_outside_zero_to_one_is_refused(stack: Stack) -> None:
    service = stack.app.service
    for fraction in (1.5, -0.1, "half", True, float("nan")):
        with stack.nothing_written(), pytest.raises(ValidationError) as refused:
            append_job_progress(
                service.database,
                service.tables,
                tenant_id=ADMIN.tenant_id,
                job_id="00000000-0000-0000-0000-000000000001",
                job_qn="reports:job:summarize",
                owner=ADMIN.id,
                fraction=fraction,
            )
        assert refused.value.details["handler"] == "reports:job:summarize"
        assert refused.value.details["fields"][0]["path"] == "fraction"


def test_the_operator_tenants_operators_follow_every_tenants_jobs(
    asanoha_stack: Callable[..., Any],
) -> None:
    from asanoha.platform.model import SessionUser

    stack: Stack = asanoha_stack(
        features=[crm, reports], jobs=True, settings={"operator_tenant": "ops"}
    )
    ops_operator = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
    ops_clerk = SessionUser.of("ops-2", "ops", ["Admin"])
    for served in serve(stack):
        with (
            open_stream(served.base_url, served.token(ops_operator), JOBS) as operator,
            open_stream(served.base_url, served.token(ops_clerk), JOBS) as clerk,
        ):
            for stream in (operator, clerk):
                stream.read_until(lambda s: b"retry:" in s.raw)
            stack.http.write_ok("crm:write:ticket:create", {"title": "a"}, ADMIN)
            stack.drain()
            stack.http.write_ok("crm:write:ticket:create", {"title": "b"}, TestUsers.other_tenant)
            stack.drain()
            operator.read_until(lambda s: len(s.events) == 6)
        # Both tenants' jobs (two progress events and an end each), and no ticket event:
        # entity events stay with their own tenant. A clerk of the operator tenant sees none.
        # Neither job is of the operator tenant: one of each other tenant.
        assert len({m.json["streamId"] for m in operator.events}) == 2
        assert {m.json["type"] for m in operator.events} == {
            "asanoha:job.progress",
            "asanoha:job.succeeded",
        }
        assert clerk.events == []
