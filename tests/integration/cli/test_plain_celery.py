"""Celery's own command line on an asanoha module: ``celery -A shop`` finds the asanoha App
and is told what to run instead; ``celery -A shop:celery`` with ``celery = app.celery`` gets
the application's Celery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.cli.conftest import Project

SHOP_WITH_CELERY = """
from asanoha import App, Feature

feature = Feature("shop")


@feature.job("hello", manual=True)
def hello(payload, ctx):
    ctx.log.info("hello")


app = App([feature])
celery = app.celery
"""


def celery(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    script = str(Path(sys.executable).parent / "celery")
    return subprocess.run(
        [script, *args],
        cwd=project.folder,
        env={**project.env(), "PYTHONPATH": str(project.folder), "ASANOHA_QUEUE_PREFIX": "plain"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_celery_on_the_module_is_told_to_use_asanoha_worker(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_CELERY, encoding="utf-8")
    done = celery(project, "-A", "shop", "worker")
    assert done.returncode == 2
    assert "this is an asanoha App, not a Celery app" in done.stderr
    assert "asanoha worker --app MODULE:app" in done.stderr
    assert "Traceback" not in done.stderr


def test_celery_on_the_apps_celery_gets_its_lanes_and_jobs(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_CELERY, encoding="utf-8")
    done = celery(project, "-A", "shop:celery", "report")
    assert done.returncode == 0, done.stderr
    assert "task_default_queue: 'plain.worker'" in done.stdout
    assert "'shop:job:hello': {'queue': 'plain.worker'}" in done.stdout
