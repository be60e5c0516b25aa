"""What a job logs through ``ctx.log`` is kept with each attempt's run row, bounded, and
shown by ``job-admin:query:runs``."""

from __future__ import annotations

from typing import Any

from asanoha.handlers import job_admin
from asanoha.platform.model import Backoff, Feature, SessionUser
from asanoha.workers.attempt_logs import MAX_LINES
from tests.integration.workers.conftest import job_runs


def logging_feature() -> Feature:
    feature = Feature("chatty")

    @feature.job("sync", manual=True, retries=1, backoff=Backoff.fixed(0.01))
    def sync(payload: dict[str, Any], ctx: Any) -> None:
        ctx.log.debug("not kept")
        ctx.log.info("attempt %d of %s", ctx.attempt, payload["what"])
        if ctx.attempt == 1:
            ctx.log.warning("remote said\x00 busy")
            raise RuntimeError("busy")

    @feature.job("flood", manual=True)
    def flood(payload: dict[str, Any], ctx: Any) -> None:
        for n in range(MAX_LINES + 50):
            ctx.log.info("line %d", n)

    return feature


def test_each_attempt_keeps_its_own_lines(jobs_stack):
    stack = jobs_stack([logging_feature(), job_admin.feature])
    job_id = stack.dispatch_job("chatty:job:sync", {"what": "orders"})
    stack.drain()
    first, second = job_runs(stack, "chatty:job:sync")
    assert (first.status, first.logs) == (
        "retrying",
        "INFO attempt 1 of orders\nWARNING remote said busy",
    )
    assert (second.status, second.logs) == ("succeeded", "INFO attempt 2 of orders")
    admin = SessionUser.of("ops", "default", ["SystemAdmin"])
    shown = stack.service.dispatch_query("job-admin:query:runs", {"id": str(job_id)}, admin)
    assert [(run["attempt"], run["logs"]) for run in shown] == [
        (2, "INFO attempt 2 of orders"),
        (1, "INFO attempt 1 of orders\nWARNING remote said busy"),
    ]


def test_a_long_log_keeps_its_first_lines_and_counts_the_rest(jobs_stack):
    stack = jobs_stack([logging_feature()])
    stack.dispatch_job("chatty:job:flood", {})
    stack.drain()
    [run] = job_runs(stack, "chatty:job:flood")
    lines = run.logs.splitlines()
    assert len(lines) == MAX_LINES + 1
    assert lines[0] == "INFO line 0"
    assert lines[MAX_LINES - 1] == f"INFO line {MAX_LINES - 1}"
    assert lines[-1] == "[50 more line(s) not kept]"
