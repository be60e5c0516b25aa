"""The README quickstart works as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_quickstart_declares_calls_and_tests(tmp_path: Path) -> None:
    declare, call, tests = python_blocks()[:3]
    (tmp_path / "shop.py").write_text(declare, encoding="utf-8")
    (tmp_path / "call.py").write_text(
        "from asanoha import AccessDeniedError\ntry:\n"
        + "".join(f"    {line}\n" for line in call.splitlines())
        + "except AccessDeniedError as error:\n    print('denied', error.reason)\n",
        encoding="utf-8",
    )
    (tmp_path / "test_shop.py").write_text(tests, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "ASANOHA_DATABASE_URL": f"sqlite+pysqlite:///{tmp_path / 'shop.sqlite3'}",
    }
    called = subprocess.run(
        [sys.executable, "call.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "denied instruction_field_write_requires_high_risk"
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout


def test_agents_example_runs_an_mcp_session_with_an_approval(tmp_path: Path) -> None:
    blocks = python_blocks()
    declare = blocks[0]
    client = next(block for block in blocks if block.startswith("# agent_client.py"))
    (tmp_path / "shop.py").write_text(declare, encoding="utf-8")
    (tmp_path / "agent_client.py").write_text(client, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "ASANOHA_DATABASE_URL": f"sqlite+pysqlite:///{tmp_path / 'shop.sqlite3'}",
        "ASANOHA_JWT_SECRET": "a-long-random-secret-for-the-readme-test",
    }
    ran = subprocess.run(
        [sys.executable, "agent_client.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert "agent.approval_required" in lines
    assert "created tone" in lines
    assert "trust trusted" in lines
    assert any(line.startswith("prompts:write:prompt:create") for line in lines)
