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
