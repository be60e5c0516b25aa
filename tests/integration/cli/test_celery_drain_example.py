"""The pytest example with Celery's own fixtures runs as shipped (examples/pytest_celery)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pytest_celery"
DOCKER_EXAMPLE = ROOT / "examples" / "pytest_celery_docker"


def test_asanoha_drain_waits_for_the_in_process_celery_worker(tmp_path: Path) -> None:
    # Copied out of the repository: its conftest must be the root one (pytest_plugins).
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    done = subprocess.run(
        # Warnings are errors: the example must not make pytest warn (it once listed
        # celery.contrib.pytest in pytest_plugins, already imported by pytest-celery).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=project,
        env={**env, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_docker_example_passes_or_says_no_docker_engine_answers(tmp_path: Path) -> None:
    # pytest-celery's celery_setup needs a Docker engine; without one the example's tests are
    # skipped with the reason, and the run still succeeds.
    project = tmp_path / "project"
    shutil.copytree(DOCKER_EXAMPLE, project)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=project,
        env={**env, "PYTHONPATH": str(project), "ASANOHA_SOURCE": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout or "no Docker engine answers" in done.stdout, done.stdout
