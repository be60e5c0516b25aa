"""``job-admin:query:pauses``: the paused jobs and lanes, and each job a pause holds (by
itself or by its lane), for system administrators; who paused is shown to the operator
tenant only."""

from __future__ import annotations

from typing import Any

from asanoha.handlers import job_admin
from asanoha.platform.model import Feature, SessionUser

OPERATOR = SessionUser.of("ops-1", "ops", ["SystemAdmin"])
TENANT_ADMIN = SessionUser.of("acme-1", "acme", ["SystemAdmin"])
CLERK = SessionUser.of("clerk-1", "ops", ["Admin"])


def shop() -> Feature:
    feature = Feature("shop")

    @feature.job("mail", manual=True)
    def mail(payload: dict[str, Any], ctx: Any) -> None:
        pass

    @feature.job("index", manual=True, lane="api")
    def index(payload: dict[str, Any], ctx: Any) -> None:
        pass

    return feature


def test_pauses_lists_each_pause_and_the_jobs_it_holds(asanoha_stack: Any) -> None:
    stack = asanoha_stack(features=[shop(), job_admin.feature], settings={"operator_tenant": "ops"})
    assert stack.http.query_ok("job-admin:query:pauses", {}, OPERATOR) == {
        "pauses": [],
        "held": {},
    }
    stack.http.write_ok("job-admin:write:pause", {"target": "api"}, OPERATOR)
    stack.http.write_ok("job-admin:write:pause", {"target": "shop:job:mail"}, OPERATOR)

    seen = stack.http.query_ok("job-admin:query:pauses", {}, OPERATOR)
    assert [(p["target"], p["paused_by"]) for p in seen["pauses"]] == [
        ("lane:api", "ops-1"),
        ("shop:job:mail", "ops-1"),
    ]
    assert seen["held"] == {"shop:job:index": "lane:api", "shop:job:mail": "shop:job:mail"}
    # Another tenant's administrator sees what holds its jobs, not which operator paused it.
    elsewhere = stack.http.query_ok("job-admin:query:pauses", {}, TENANT_ADMIN)
    assert elsewhere["held"] == seen["held"]
    assert [p["paused_by"] for p in elsewhere["pauses"]] == [None, None]
    refused = stack.http.query_err("job-admin:query:pauses", {}, CLERK)
    assert (refused.http_status, refused.reason) == (403, "role_required")

    stack.http.write_ok("job-admin:write:resume", {"target": "lane:api"}, OPERATOR)
    assert stack.http.query_ok("job-admin:query:pauses", {}, OPERATOR)["held"] == {
        "shop:job:mail": "shop:job:mail"
    }
