"""``asanoha --version`` prints the installed version."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from asanoha.cli import cli


def test_version_prints_the_installed_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"asanoha {version('asanoha')}\n"


def test_without_a_command_the_help_lists_the_commands() -> None:
    result = CliRunner().invoke(cli, [])
    for command in ("demo", "serve", "worker"):
        assert command in result.output
