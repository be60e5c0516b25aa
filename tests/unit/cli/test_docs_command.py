"""``asanoha docs`` refuses in one line what it cannot serve, and is in the command reference."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.cli import docs as docs_command
from asanoha.cli.reference import cli_reference


def test_without_mkdocs_it_says_what_to_install_and_exits_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes ``import mkdocs`` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "mkdocs", None)
    result = CliRunner().invoke(cli, ["docs"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "error: mkdocs is not installed: install the dev extra "
        "(pip install -e '.[dev]' in the checkout)."
    ]


def test_without_the_site_configuration_it_names_the_missing_file_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "mkdocs.yml"
    monkeypatch.setattr(docs_command, "SITE_CONFIG", missing)
    result = CliRunner().invoke(cli, ["docs"])
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith(f"error: no {missing}: ")


def test_the_site_configuration_is_the_repositorys() -> None:
    assert Path(__file__).resolve().parents[3] / "mkdocs.yml" == docs_command.SITE_CONFIG
    assert docs_command.SITE_CONFIG.is_file()


def test_the_command_reference_documents_docs_and_its_options() -> None:
    reference = cli_reference()
    assert "## `asanoha docs`" in reference
    assert "| `--port` | The port to serve on. (default: `8000`) |" in reference
    assert "| `--host` | The address to serve on. (default: `127.0.0.1`) |" in reference
