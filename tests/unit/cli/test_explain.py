"""``asanoha explain`` shows both texts of a reason in English and German."""

from __future__ import annotations

from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.platform.errors.reasons import Reasons


def run(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "400"}).invoke(cli, ["explain", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_explain_shows_developer_and_end_user_texts_in_both_languages() -> None:
    output = run("token_expired")
    assert "Your session has expired" in output
    assert "Ihre Sitzung ist abgelaufen. Bitte melden Sie sich erneut an." in output
    assert "Das Bearer-Token ist abgelaufen; stellen Sie ein neues aus." in output
    for header in ("developer", "end user", "en", "de"):
        assert header in output


def test_placeholders_stay_visible() -> None:
    assert "{error}" in run("token_invalid")


def test_without_a_reason_every_reason_is_listed() -> None:
    assert run().split() == [member.value for member in Reasons]


def test_an_unknown_reason_suggests_the_close_ones() -> None:
    result = CliRunner(env={"COLUMNS": "400"}).invoke(cli, ["explain", "role_requird"])
    assert result.exit_code == 2
    assert "did you mean role_required" in result.output


def plan_of(qn: str) -> str:
    return run(qn, "--app", "tests.unit.cli.plan_app:app")


def test_a_write_handlers_plan_lists_the_steps_that_apply_to_it_in_order() -> None:
    output = plan_of("desk:write:note")
    assert "desk:write:note: write plan (entry risk high)" in output
    steps = [line.split()[1] for line in output.splitlines() if line.strip()[:1].isdigit()]
    assert steps == [
        "admit",
        "rate_limit",
        "idempotency",
        "transaction",
        "approval",
        "handler",
        "executor",
        "enqueue",
        "commit",
        "outcome",
        "after_commit",
    ]
    assert "5/minute per user" in output
    assert "desk:job:noted" in output
    assert "[service/approvals.py]" in output


def test_steps_that_cannot_apply_are_left_out_and_the_entity_steps_are_shown() -> None:
    output = plan_of("desk:write:ticket:create")
    steps = [line.split()[1] for line in output.splitlines() if line.strip()[:1].isdigit()]
    # No rate limit, no triggered job; it writes an instruction field, so it resolves high
    # and an agent's call needs approval.
    assert steps == [
        "admit",
        "idempotency",
        "transaction",
        "approval",
        "handler",
        "validation_and_hooks",
        "gates",
        "field_access",
        "sealing",
        "append_and_project",
        "commit",
        "outcome",
        "after_commit",
    ]
    assert "instruction fields brief need a high-risk entry" in output
    assert "personal fields email need public intake if anonymous" in output


def test_a_hard_delete_plan_shows_the_irreversible_gate() -> None:
    output = plan_of("desk:write:ticket:delete")
    assert "a hard delete needs a high-risk entry handler" in output


def test_a_handler_name_needs_an_app_and_must_be_a_write() -> None:
    runner = CliRunner(env={"COLUMNS": "400", "ASANOHA_APP": None})
    missing = runner.invoke(cli, ["explain", "desk:write:note"])
    assert missing.exit_code == 2
    assert "--app" in missing.output
    unknown = runner.invoke(
        cli, ["explain", "desk:write:nte", "--app", "tests.unit.cli.plan_app:app"]
    )
    assert unknown.exit_code == 2
    assert "did you mean desk:write:note" in unknown.output
    query = runner.invoke(
        cli, ["explain", "desk:query:ticket:list", "--app", "tests.unit.cli.plan_app:app"]
    )
    assert query.exit_code == 2
    assert "no write plan" in query.output
