"""``asanoha serve`` under ``ASANOHA_LOG_FORMAT=json`` writes JSON lines only: what it tells
at start (the master key it made, that the jobs run in its process, the development token)
is a log record like any other line."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.integration.cli.conftest import asanoha_script
from tests.integration.cli.test_serve_embedded import STEP, plain_env
from tests.integration.cli.test_worker_metrics import free_port

CLINIC = """
from typing import Any

from asanoha import Access, App, Entity, Feature, fields

patient = Entity(table="patients", fields={"name": fields.text(personal="self")})
feature = Feature("clinic")
feature.crud("patient", patient, write=Access(roles=["Nurse"]), read=Access(roles=["Nurse"]))


@feature.job("greet", on="clinic:write:patient:create")
def greet(payload: dict[str, Any], ctx: Any) -> None:
    return None


app = App([feature])
"""


def serve_until_started(folder: Path, **env: str) -> str:
    """What ``asanoha serve`` wrote on stderr until its server started (then it is stopped)."""
    output = folder / "serve.log"
    with output.open("w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            [asanoha_script(), "serve", "--app", "clinic:app", "--port", str(free_port())],
            cwd=folder,
            env={**plain_env(), **env},
            stdout=subprocess.DEVNULL,
            stderr=sink,
            text=True,
        )
        try:
            deadline = time.monotonic() + STEP
            while "Application startup complete" not in output.read_text(encoding="utf-8"):
                assert process.poll() is None, output.read_text(encoding="utf-8")
                assert time.monotonic() < deadline, output.read_text(encoding="utf-8")
                time.sleep(0.1)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STEP)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return output.read_text(encoding="utf-8")


def test_serve_tells_its_start_in_json_lines(tmp_path: Path) -> None:
    (tmp_path / "clinic.py").write_text(CLINIC, encoding="utf-8")
    text = serve_until_started(tmp_path, ASANOHA_LOG_FORMAT="json")
    records: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines() if line]
    told = [record["message"] for record in records if record["logger"] == "asanoha.cli"]
    assert any(message.startswith("made a master key for personal data in") for message in told)
    assert any(message.startswith("Jobs and consumers run in this process") for message in told)
    assert any(message.startswith("    Authorization: Bearer ") for message in told)


def test_serve_tells_its_start_in_plain_lines_on_text(tmp_path: Path) -> None:
    (tmp_path / "clinic.py").write_text(CLINIC, encoding="utf-8")
    lines = serve_until_started(tmp_path, ASANOHA_LOG_FORMAT="text").splitlines()
    assert any(line.startswith("made a master key for personal data in") for line in lines)
    assert any(line.startswith("Jobs and consumers run in this process") for line in lines)
