"""The embedded default: ``asanoha serve`` with no settings accepts a write whose job runs."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
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
    Path("job-ran.txt").write_text(payload["text"], encoding="utf-8")


app = App([feature])
"""


def test_serve_on_no_settings_runs_the_api_and_the_jobs(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(SHOP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    env.pop("PYTHONPATH", None)
    port = free_port()
    server = subprocess.Popen(
        [asanoha_script(), "serve", "--app", "shop:app", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert server.stderr is not None
    threading.Thread(
        target=lambda: [lines.put(line) for line in server.stderr], daemon=True
    ).start()
    try:
        token = None
        while token is None:
            line = lines.get(timeout=60)
            found = re.search(r"Authorization: Bearer (\S+)", line)
            token = found.group(1) if found else None
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        response = httpx.post(
            f"{base}/api/write/shop:write:note:create",
            json={"text": "hello"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        marker = tmp_path / "job-ran.txt"
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text(encoding="utf-8") == "hello"
    finally:
        server.send_signal(signal.SIGINT)
        returncode = server.wait(timeout=60)
    assert returncode == 0
