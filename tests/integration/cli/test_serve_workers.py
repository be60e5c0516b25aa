"""``asanoha serve --workers N``: N uvicorn worker processes serve the application on one port."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.integration.cli.conftest import Project, asanoha_script

STARTUP_TIMEOUT = 60


def child_pids(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def is_api_worker(pid: int) -> bool:
    """A uvicorn worker, not multiprocessing's resource tracker."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    return b"resource_tracker" not in command


def test_serve_with_two_workers_answers_from_two_processes(project: Project) -> None:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [asanoha_script(), "serve", "--app", "shop:app", "--port", str(port), "--workers", "2"],
        cwd=project.folder,
        env=project.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        answered = False
        while time.monotonic() < deadline and server.poll() is None:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).is_success
            except httpx.TransportError:
                answered = False
            if answered and len(child_pids(server.pid)) >= 2:
                break
            time.sleep(0.2)
        assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
        assert answered
        workers = [pid for pid in child_pids(server.pid) if is_api_worker(pid)]
        assert len(workers) == 2
        openapi = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5).json()
        assert "/api/write/shop:write:note:create" in openapi["paths"]
    finally:
        server.terminate()
        server.wait(timeout=30)
