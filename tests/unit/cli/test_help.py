"""Every command and command group explains itself in ``--help``."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from asanoha.cli import cli

ROOT = typer.main.get_command(cli)


def command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``, groups included (typer ships its own click)."""
    paths = [prefix] if prefix else []
    if hasattr(group, "commands"):
        for name, command in sorted(group.commands.items()):
            paths += command_paths(command, (*prefix, name))
    return paths


def command_at(path: tuple[str, ...]) -> Any:
    command: Any = ROOT
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", command_paths(ROOT), ids=" ".join)
def test_every_command_has_help_text(path: tuple[str, ...]) -> None:
    command = command_at(path)
    assert command.help, f"asanoha {' '.join(path)} has no docstring"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    first_line = command.help.strip().splitlines()[0]
    assert first_line.split()[0] in result.output
    assert f"Usage: root {' '.join(path)}" in result.output


def test_the_command_list_names_the_operations_commands() -> None:
    names = {path[0] for path in command_paths(ROOT)}
    assert {
        "demo",
        "serve",
        "worker",
        "beat",
        "flower",
        "celery",
        "migrate",
        "token",
        "explain",
        "tools",
        "consumers",
        "jobs",
        "mcp",
    } <= names


@pytest.mark.parametrize("path", [(), *command_paths(ROOT)], ids=lambda p: " ".join(p) or "asanoha")
def test_help_names_values_as_a_shell_user_knows_them(path: tuple[str, ...]) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    for placeholder in ("<str>", "<bool>", "<int", "<float", "<list", "``"):
        assert placeholder not in result.output, f"asanoha {' '.join(path)} --help: {placeholder}"


def test_a_help_paragraph_flows_instead_of_keeping_the_docstrings_line_breaks() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["jobs", "retry", "--help"])
    # Two lines of the docstring on one line of the page, without the backticks.
    assert any(
        "declares once more. A run row with status requeued records the retry." in line
        for line in result.output.splitlines()
    )
    assert "TEXT" in result.output and "JOB_ID" in result.output


def test_help_text_in_angle_brackets_is_not_taken_for_markup() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["worker", "--help"])
    assert "PREFIX@%h-PID" in " ".join(result.output.split())
