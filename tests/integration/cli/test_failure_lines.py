"""A command that fails because of its surroundings says so in one line and exits 1; the
traceback is for ``--debug`` and development."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.cli.conftest import Project, asanoha_script

#: A port nothing listens on.
DEAD_DATABASE = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"


def run(project: Project, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [asanoha_script(), *args],
        cwd=project.folder,
        env={**project.env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_database_that_cannot_be_reached_is_one_line(project: Project) -> None:
    done = run(project, "migrate", "--app", "shop:app", ASANOHA_DATABASE_URL=DEAD_DATABASE)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach the database (")
    assert "ASANOHA_DATABASE_URL" in line


@pytest.mark.parametrize("how", [("--debug",), ()], ids=["debug-option", "development-setting"])
def test_the_traceback_comes_with_debug_or_in_development(
    project: Project, how: tuple[str, ...]
) -> None:
    extra = {} if how else {"ASANOHA_DEVELOPMENT": "true"}
    done = run(
        project, *how, "migrate", "--app", "shop:app", ASANOHA_DATABASE_URL=DEAD_DATABASE, **extra
    )
    assert done.returncode == 1
    assert "Traceback" in done.stderr or "OperationalError" in done.stderr
    assert "Connection refused" in done.stderr


def test_a_setting_that_cannot_be_read_is_named(project: Project) -> None:
    done = run(project, "migrate", "--app", "shop:app", ASANOHA_DATABASE_POOL_SIZE="many")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: invalid settings (ASANOHA_DATABASE_POOL_SIZE: ")


def test_a_mistake_in_the_apps_declarations_is_one_line(project: Project) -> None:
    (project.folder / "shop.py").write_text(
        "from asanoha import App, Entity, Feature, fields\n"
        "note = Entity(table='notes', fields={'text': fields.text()})\n"
        "app = App([Feature('shop')])\n",
        encoding="utf-8",
    )
    done = run(project, "migrate", "--app", "shop:app")
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "personal" in line
    assert "--debug" in line


def test_a_usage_mistake_still_exits_2(project: Project) -> None:
    done = run(project, "migrate", "--app", "shop")
    assert done.returncode == 2
    assert "module:attribute" in done.stderr
