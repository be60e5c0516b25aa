"""``asanoha console`` serves the console alone, and ``asanoha serve`` serves it at
``/console`` next to the API, both as the installed command runs them."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from asanoha.platform.http import issue_token
from asanoha.platform.model import SessionUser
from asanoha.platform.settings import Settings
from asanoha.testing.serving import free_port
from tests.integration.cli.conftest import JWT_SECRET, Project, asanoha_script
from tests.integration.cli.conftest import project as project

STARTUP_TIMEOUT = 60
ADMIN = SessionUser.of("ops-1", "default", ["SystemAdmin"])
ADMIN_FEATURES = """
from asanoha.handlers import consumer_admin, job_admin

app = App([feature, job_admin.feature, consumer_admin.feature])
"""


@contextmanager
def running(project: Project, *args: str) -> Iterator[str]:
    """``asanoha ARGS --port P`` in the project; its base URL once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [asanoha_script(), *args, "--port", str(port)],
        cwd=project.folder,
        env=project.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(f"{base}/console/login", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the console did not answer"
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


def signed_in_jobs_page(base: str) -> httpx.Response:
    """Sign in through the login form; the Jobs page it leads to."""
    with httpx.Client(base_url=base, timeout=10, follow_redirects=True) as client:
        form = client.get("/console/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        token = issue_token(Settings(jwt_secret=JWT_SECRET), ADMIN)
        client.post("/console/login", data={"nonce": nonce.group(1), "token": token})
        return client.get("/console/jobs")


@pytest.fixture
def admin_project(project: Project) -> Project:
    with (project.folder / "shop.py").open("a", encoding="utf-8") as module:
        module.write(ADMIN_FEATURES)
    migrated = project.run("migrate", "--app", "shop:app")
    assert migrated.returncode == 0, migrated.stderr
    return project


def test_asanoha_console_serves_the_console_alone(admin_project: Project) -> None:
    with running(admin_project, "console", "--app", "shop:app") as base:
        root = httpx.get(base, timeout=10, follow_redirects=True)
        assert root.url.path == "/console/login"
        # The console alone: no API.
        assert httpx.get(f"{base}/health", timeout=10).status_code == 404
        jobs = signed_in_jobs_page(base)
    assert jobs.status_code == 200
    assert "No job rows." in jobs.text


def test_asanoha_serve_serves_the_console_next_to_the_api(admin_project: Project) -> None:
    with running(admin_project, "serve", "--app", "shop:app") as base:
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
        found = httpx.get(f"{base}/console/jobs", timeout=10, follow_redirects=True)
        assert found.url.path == "/console/login"
        jobs = signed_in_jobs_page(base)
        css = httpx.get(f"{base}/console/static/console.css", timeout=10)
    assert jobs.status_code == 200
    assert 'id="tenant">default<' in jobs.text
    assert css.status_code == 200
