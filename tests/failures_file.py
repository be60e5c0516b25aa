"""A pytest plugin that writes the id of each failing test to a file as it fails.

``scripts/test.sh`` loads it (``-p tests.failures_file``) and empties the file before a run,
so a run stopped halfway still names what failed so far; ``scripts/test.sh --failed`` runs
the tests the file names again. Under pytest-xdist the controller writes (it receives every
worker's reports), the workers do not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The file, relative to the repository (``ASANOHA_FAILURES_FILE`` overrides it).
DEFAULT_FILE = Path(__file__).resolve().parents[1] / ".asanoha-failures"


def failures_file() -> Path:
    return Path(os.environ.get("ASANOHA_FAILURES_FILE") or DEFAULT_FILE)


def pytest_configure(config: pytest.Config) -> None:
    # An xdist worker has ``workerinput``; its controller writes what it reports.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FailuresFile(failures_file()), "asanoha-failures-file")


class FailuresFile:
    """Appends each failing test's id to ``path``, once."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A failure in setup or teardown fails the test too; a test is written once.
        if not report.failed:
            return
        known = self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []
        if report.nodeid not in known:
            with self.path.open("a", encoding="utf-8") as file:
                file.write(report.nodeid + "\n")
