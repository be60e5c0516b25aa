"""``asanoha worker --metrics-port``: job attempts of the pool processes on one exporter."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import httpx
from prometheus_client.parser import text_string_to_metric_families

from asanoha.testing.stack import broker_url_for_tests
from tests.integration.cli.conftest import Project, asanoha_script

SHOP_WITH_JOB = """
from typing import Any

from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.job("index", on="shop:write:note:create")
def index(payload: dict[str, Any], ctx: Any) -> None:
    pass


app = App([feature])
"""
WRITE = """
from asanoha import SessionUser
from shop import app

app.service.dispatch_write("shop:write:note:create", {"text": "hi"}, SessionUser.of("u", "t", ["Admin"]))
app.close()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def succeeded_attempts(port: int) -> float:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.TransportError:
        return -1.0  # not listening yet
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "asanoha_job_attempts_total" and sample.labels == {
                "job": "shop:job:index",
                "outcome": "succeeded",
            }:
                return sample.value
    return 0.0


def test_the_worker_exports_job_attempts_of_its_pool_processes(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_JOB, encoding="utf-8")
    (project.folder / "write.py").write_text(WRITE, encoding="utf-8")
    env = {
        **project.env(),
        "ASANOHA_BROKER_URL": broker_url_for_tests(),
        "ASANOHA_QUEUE_PREFIX": f"asanoha-metrics-{uuid.uuid4().hex[:8]}",
    }
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    port = free_port()
    worker = subprocess.Popen(
        [
            asanoha_script(),
            "worker",
            "--app",
            "shop:app",
            "--concurrency",
            "2",
            "--metrics-port",
            str(port),
        ],
        cwd=project.folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        written = subprocess.run(
            [sys.executable, "write.py"],
            cwd=project.folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert written.returncode == 0, written.stderr
        deadline = time.monotonic() + 60
        while succeeded_attempts(port) < 1 and time.monotonic() < deadline:
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            time.sleep(0.2)
        assert succeeded_attempts(port) == 1
    finally:
        worker.terminate()
        worker.wait(timeout=30)
