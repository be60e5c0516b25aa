"""The embedded default: ``asanoha serve`` with no settings accepts a write whose job runs,
prints what its jobs do, runs the jobs an earlier process left behind, and reloads on a
change with ``--reload``."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.integration.cli.conftest import asanoha_script
from tests.integration.cli.test_worker_metrics import free_port

SHOP = """
from pathlib import Path
from typing import Any

from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Editor"]), read=Access(roles=["Editor"]))


@feature.job("mark", on="shop:write:note:create")
def mark(payload: dict[str, Any], ctx: Any) -> None:
    ctx.log.info("marking %s", payload["text"])
    Path("job-ran.txt").write_text(payload["text"], encoding="utf-8")


app = App([feature])
"""
#: Seconds any one wait of these tests may take.
STEP = 60


def plain_env() -> dict[str, str]:
    """The environment without any ASANOHA_ setting: the embedded default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    env.pop("PYTHONPATH", None)
    return env


class Server:
    """A running ``asanoha serve`` and what it printed on stderr."""

    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.base = f"http://127.0.0.1:{port}"
        self.printed: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        assert process.stderr is not None
        stderr = process.stderr
        threading.Thread(
            target=lambda: [self._lines.put(line) for line in stderr], daemon=True
        ).start()

    def wait_for_line(self, pattern: str) -> re.Match[str]:
        """The first line printed (so far or from now) that matches ``pattern``."""
        for line in self.printed:
            found = re.search(pattern, line)
            if found:
                return found
        deadline = time.monotonic() + STEP
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=1)
            except queue.Empty:
                continue
            self.printed.append(line)
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"serve printed no line matching {pattern!r}: {self.printed}")

    def wait_until_up(self) -> str:
        """Wait for ``/health``; return the development token it printed."""
        token = self.wait_for_line(r"Authorization: Bearer (\S+)").group(1)
        deadline = time.monotonic() + STEP
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/health", timeout=5).status_code == 200:
                    return token
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("serve did not answer /health")


@contextmanager
def serving(folder: Path, *options: str) -> Iterator[Server]:
    """``asanoha serve --app shop:app OPTIONS`` in ``folder``, stopped with Ctrl-C after."""
    port = free_port()
    process = subprocess.Popen(
        [asanoha_script(), "serve", "--app", "shop:app", "--port", str(port), *options],
        cwd=folder,
        # Text lines, as on a terminal: on a pipe serve would write JSON lines.
        env={**plain_env(), "ASANOHA_LOG_FORMAT": "text"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Server(process, port)
    try:
        yield server
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STEP)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + STEP
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.read_text(encoding="utf-8")


def create_note(server: Server, token: str, text: str) -> None:
    response = httpx.post(
        f"{server.base}/api/write/shop:write:note:create",
        json={"text": text},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text


def test_serve_on_no_settings_runs_the_api_and_the_jobs(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    with serving(tmp_path) as server:
        create_note(server, server.wait_until_up(), "hello")
        assert wait_for_file(tmp_path / "job-ran.txt") == "hello"
        # What the job logged and how its attempt ended, as a Celery worker prints them.
        server.wait_for_line(r"INFO/asanoha\.job\.shop:job:mark\] marking hello")
        server.wait_for_line(r"Task shop:job:mark\[[0-9a-f-]+\] received")
        server.wait_for_line(r"Task shop:job:mark\[[0-9a-f-]+\] succeeded in")
    assert server.process.returncode == 0


def test_a_job_an_earlier_process_left_in_its_broker_runs_when_serve_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    # A script writes a note: its job is published to the script's own in-process broker,
    # which ends with the script before anything ran it.
    script = (
        "from asanoha import SessionUser\n"
        "from shop import app\n"
        "app.create_schema()\n"
        "app.service.dispatch_write('shop:write:note:create', {'text': 'left'},\n"
        "                           SessionUser.of('u-1', 'default', ['Editor']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**plain_env(), "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=STEP,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "job-ran.txt").exists()
    with serving(tmp_path) as server:
        server.wait_for_line(r"1 job\(s\) an earlier process published but never ran")
        # Within this test's wait, not the hour of the visibility timeout.
        assert wait_for_file(tmp_path / "job-ran.txt") == "left"


def test_serve_reload_serves_a_handler_added_to_the_module(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    with serving(tmp_path, "--reload") as server:
        token = server.wait_until_up()
        create_note(server, token, "before")
        assert wait_for_file(tmp_path / "job-ran.txt") == "before"
        added = SHOP.replace(
            "app = App([feature])",
            "from pydantic import BaseModel\n\n\n"
            "class Empty(BaseModel):\n"
            "    pass\n\n\n"
            "@feature.query_handler('ping', access=Access(open_to_all='a test'))\n"
            "def ping(payload: Empty, ctx: Any) -> str:\n"
            "    return 'pong'\n\n\n"
            "app = App([feature])",
        )
        (tmp_path / "shop.py").write_text(added, encoding="utf-8")
        deadline = time.monotonic() + STEP
        answer = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.post(
                    f"{server.base}/api/query/shop:query:ping",
                    json={},
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=5,
                )
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 200:
                break
            time.sleep(0.2)
        assert answer is not None and answer.json()["data"] == "pong", answer
        # The reloaded process still runs the jobs.
        (tmp_path / "job-ran.txt").unlink()
        create_note(server, token, "after")
        assert wait_for_file(tmp_path / "job-ran.txt") == "after"


def test_serve_reload_is_refused_outside_development(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    done = subprocess.run(
        [asanoha_script(), "serve", "--app", "shop:app", "--reload"],
        cwd=tmp_path,
        env={
            **plain_env(),
            "ASANOHA_BROKER_URL": "redis://127.0.0.1:1/0",
            "ASANOHA_JWT_SECRET": "a-long-random-secret-for-this-test-only",
        },
        capture_output=True,
        text=True,
        timeout=STEP,
    )
    assert done.returncode == 2
    assert "--reload is for development" in done.stderr


def test_serve_root_path_is_the_prefix_the_openapi_document_names(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    with serving(tmp_path, "--root-path", "/shop-api", "--log-level", "warning") as server:
        server.wait_until_up()
        document = httpx.get(f"{server.base}/openapi.json", timeout=10).json()
        assert document["servers"] == [{"url": "/shop-api"}]
