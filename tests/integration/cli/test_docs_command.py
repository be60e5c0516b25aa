"""``asanoha docs`` serves the documentation site on the port it is given."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

#: Building the site (every page, the API reference from the code) takes seconds.
STARTUP_DEADLINE = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_docs_serves_the_site_home_page_on_the_given_port(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "docs.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "asanoha", "docs", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        page = None
        while page is None and time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
            except httpx.TransportError:
                time.sleep(0.2)
        assert page is not None, f"the site was not served in time:\n{log.read_text()}"
        assert page.status_code == 200
        assert "<title>asanoha</title>" in page.text  # the site's name, mkdocs.yml's site_name
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
