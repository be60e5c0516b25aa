"""``tests/failures_file.py``: each failing test's id is in the file as soon as it fails, so
a run stopped halfway still names what failed. (Under pytest-xdist the controller writes it,
from the reports every worker sends.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = """
import os


def test_fails():
    assert False


def test_passes():
    pass


def test_stops_the_run():
    os._exit(3)  # no summary, no end-of-session hook: only what was written as it failed
"""


def test_the_file_names_each_failure_as_it_happens(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE, encoding="utf-8")
    failures = tmp_path / "failures"
    env = {
        **os.environ,
        "ASANOHA_FAILURES_FILE": str(failures),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.failures_file",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "test_suite.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert failures.read_text(encoding="utf-8") == "test_suite.py::test_fails\n"
