"""``--app module:attribute``: found from the working folder, required, and explained when wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from asanoha import App
from asanoha.cli import cli, load_app

SHOP = """
from asanoha import App, Feature
from asanoha.platform.settings import Settings

feature = Feature("shop")
app = App([feature], Settings(database_url="sqlite+pysqlite:///:memory:"))
not_an_app = 3
"""


def asanoha_script() -> str:
    """The installed ``asanoha`` script of this environment."""
    return str(Path(sys.executable).parent / "asanoha")


@pytest.fixture
def shop_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding ``shop.py``, as the working directory, with sys.path restored after."""
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "shop", raising=False)
    return tmp_path


def test_an_app_next_to_the_working_folder_is_found(shop_folder: Path) -> None:
    assert isinstance(load_app("shop:app"), App)


def test_a_missing_module_names_the_folder_it_looked_in(shop_folder: Path) -> None:
    with pytest.raises(typer.BadParameter, match="no module named 'shoe'"):
        load_app("shoe:app")


def test_a_missing_attribute_is_named(shop_folder: Path) -> None:
    with pytest.raises(typer.BadParameter, match="has no attribute 'aap'"):
        load_app("shop:aap")


def test_something_else_than_an_app_is_refused(shop_folder: Path) -> None:
    with pytest.raises(typer.BadParameter, match="is a int, not an asanoha App"):
        load_app("shop:not_an_app")


def test_a_reference_without_attribute_is_refused() -> None:
    with pytest.raises(typer.BadParameter, match="not module:attribute"):
        load_app("shop")


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_app_is_required_and_never_defaults_to_the_demo(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASANOHA_APP", raising=False)
    result = CliRunner().invoke(cli, [command])
    assert result.exit_code == 2
    assert "Missing option '--app'" in result.output


def test_the_installed_script_finds_an_app_in_the_folder_it_runs_in(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [asanoha_script(), "serve", "--app", "shop:not_an_app"],
        cwd=tmp_path,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Reaching the type check proves shop.py was imported from the working folder.
    assert done.returncode == 2, done.stdout + done.stderr
    assert "shop:not_an_app is a int, not an asanoha App" in done.stderr


def test_asanoha_app_is_the_default_of_app(shop_folder: Path) -> None:
    result = CliRunner().invoke(cli, ["tools"], env={"ASANOHA_APP": "shop:not_an_app"})
    # Reaching the type check proves the variable named the application.
    assert result.exit_code == 2
    assert "shop:not_an_app is a int, not an asanoha App" in result.output


def test_python_dash_m_asanoha_runs_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asanoha", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "worker" in done.stdout
