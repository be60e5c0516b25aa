"""``asanoha workflows runs|show|start|cancel|retry``: an operator starts a run, finds it
failed, reads why, retries it and sees it succeed; refusals exit 1 with the reason."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from asanoha import App, StepContext, WorkflowFailedError
from asanoha.cli import cli
from asanoha.platform.model import Feature

#: The application the commands load (``--app`` below); the test sets it to its stack's.
APP: App | None = None
APP_OPTION = ["--app", f"{__name__}:APP"]


def report_feature(broken: set[str]) -> Feature:
    shop = Feature("shop")
    report = shop.workflow("report", manual=True)

    @report.step("gather", retries=0)
    def gather(payload: dict[str, Any], ctx: StepContext) -> list[str]:
        if payload["name"] in broken:
            raise RuntimeError(f"cannot gather {payload['name']}")
        return [payload["name"]]

    @report.step("write", after="gather")
    def write(payload: dict[str, Any], ctx: StepContext) -> str:
        return "report of " + ctx.results["gather"][0]

    return shop


def workflows(*args: str) -> Result:
    return CliRunner().invoke(cli, ["workflows", *args, *APP_OPTION], env={"COLUMNS": "250"})


def test_an_operator_starts_reads_and_retries_a_run_from_the_command_line(
    asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {"q3"}
    stack = asanoha_stack(features=[report_feature(broken)], jobs=True)
    monkeypatch.setattr(sys.modules[__name__], "APP", stack.app)

    started = workflows("start", "shop:workflow:report", "--payload", '{"name": "q3"}')
    assert started.exit_code == 0, started.output
    run_id = started.output.split()[1].rstrip(":")
    assert started.output == f"shop:workflow:report {run_id}: running\n"
    uuid.UUID(run_id)
    with pytest.raises(WorkflowFailedError):
        stack.drain()

    listed = workflows("runs", "--state", "failed", "--json")
    assert listed.exit_code == 0, listed.output
    [run] = json.loads(listed.output)["runs"]
    assert (run["id"], run["state"], run["failed_step"]) == (run_id, "failed", "gather")
    shown = workflows("show", run_id)
    assert shown.exit_code == 0, shown.output
    assert "failed" in shown.output and "cannot gather q3" in shown.output

    broken.clear()
    retried = workflows("retry", run_id)
    assert retried.exit_code == 0, retried.output
    assert f"shop:workflow:report {run_id}: running again" in retried.output
    stack.drain()
    done = json.loads(workflows("show", run_id, "--json").output)
    assert (done["state"], done["result"]) == ("succeeded", "report of q3")

    again = workflows("retry", run_id)
    assert again.exit_code == 1
    assert "workflow_run_not_failed" in again.output
    unknown = workflows("cancel", str(uuid.uuid4()))
    assert unknown.exit_code == 1 and "workflow_run_not_found" in unknown.output
    bad = workflows("start", "shop:workflow:report", "--payload", "[1]")
    assert bad.exit_code == 2


def test_an_operator_approves_a_step_a_run_waits_at(
    asanoha_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asanoha import Access

    shop = Feature("shop")
    release = shop.workflow("release", manual=True)
    release.approval("go", access=Access(roles=["Releaser"]))

    @release.step("ship", after="go")
    def ship(payload: dict[str, Any], ctx: StepContext) -> str:
        return "shipped after " + ctx.results["go"]["approved_by"]

    stack = asanoha_stack(features=[shop], jobs=True)
    monkeypatch.setattr(sys.modules[__name__], "APP", stack.app)
    run_id = str(stack.app.workflows.start("shop:workflow:release", {}))
    stack.drain()

    refused = workflows("approve", run_id, "go", "--by", "dana")
    assert refused.exit_code == 1
    assert "role_required" in refused.output
    approved = workflows("approve", run_id, "go", "--by", "dana", "--role", "Releaser")
    assert approved.exit_code == 0, approved.output
    assert approved.output == f"shop:workflow:release {run_id}: go approved by dana\n"
    stack.drain()
    done = json.loads(workflows("show", run_id, "--json").output)
    assert (done["state"], done["result"]) == ("succeeded", "shipped after dana")
    again = workflows("approve", run_id, "go", "--by", "dana", "--role", "Releaser")
    assert again.exit_code == 1 and "workflow_step_not_waiting" in again.output
