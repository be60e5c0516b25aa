"""Every command takes ``--app`` from ``ASANOHA_APP`` when it is not given, and the variables
an option falls back to may come from a ``.env`` file in the working folder, as settings do
(the environment wins)."""

from __future__ import annotations

import subprocess

from asanoha.platform.store.migrations import platform_head
from tests.integration.cli.conftest import Project, asanoha_script


def run(project: Project, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [asanoha_script(), *args],
        cwd=project.folder,
        env={**project.env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def upgraded(done: subprocess.CompletedProcess[str]) -> bool:
    return f"upgraded from an empty database to {platform_head()}" in done.stdout


def test_migrate_takes_the_app_from_the_environment(project: Project) -> None:
    done = run(project, "migrate", ASANOHA_APP="shop:app")
    assert done.returncode == 0, done.stderr
    assert upgraded(done)


def test_migrate_takes_the_app_from_a_dotenv_file_in_the_working_folder(
    project: Project,
) -> None:
    (project.folder / ".env").write_text("ASANOHA_APP=shop:app\n", encoding="utf-8")
    done = run(project, "migrate")
    assert done.returncode == 0, done.stderr
    assert upgraded(done)


def test_the_environment_wins_over_the_dotenv_file(project: Project) -> None:
    (project.folder / ".env").write_text("ASANOHA_APP=nowhere:app\n", encoding="utf-8")
    done = run(project, "migrate", "check", ASANOHA_APP="shop:app")
    # The environment's application is loaded: its database is behind, nothing is missing.
    assert done.returncode == 1, done.stderr
    assert "asanoha migrate --app shop:app" in done.stdout


def test_migrate_without_an_app_names_the_option_and_the_variable(project: Project) -> None:
    done = run(project, "migrate")
    assert done.returncode == 2
    assert "Missing option '--app' (or ASANOHA_APP" in " ".join(done.stderr.split())


def test_flower_takes_its_basic_auth_from_a_dotenv_file(project: Project) -> None:
    (project.folder / ".env").write_text(
        "ASANOHA_APP=shop:app\nASANOHA_FLOWER_BASIC_AUTH=ops:secret\n", encoding="utf-8"
    )
    done = run(project, "flower")
    # Past the authentication check, to the broker check of the embedded default.
    assert "needs authentication" not in done.stderr
    assert done.returncode == 1
    assert "needs a broker other processes reach" in done.stderr
