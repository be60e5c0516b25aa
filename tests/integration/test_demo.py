"""``asanoha demo`` runs end to end on the embedded default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_shows_the_gate_the_retry_and_the_drain(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    done = subprocess.run(
        [sys.executable, "-m", "asanoha.cli", "demo", "--workdir", str(tmp_path)],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "403 instruction_field_write_requires_high_risk" in done.stdout
    assert (
        "DrainSummary(succeeded=2, failed=0, retried=1, cancelled=0, snoozed=0, paused={})"
        in done.stdout
    )
    assert "ConnectionError: the search index was not reachable" in done.stdout
    assert "notes:workflow:digest succeeded: {'notes': 2, 'words': 4}" in done.stdout
    assert (tmp_path / "demo.sqlite3").exists()
