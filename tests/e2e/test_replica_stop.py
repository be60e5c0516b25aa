"""A read replica that stops is bypassed, and serves again once it is back: the local hot
standby (``scripts/replica.sh``) is stopped for real. End-to-end, so that it runs alone."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.testing import TestUsers
from asanoha.testing.databases import replica_server_url
from asanoha.testing.plugin import StackFactory
from tests.integration.replica.conftest import notes
from tests.standby import standby_to_ourselves

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TITLES = "notes:query:titles"


def served(served_by: str, reason: str = "") -> float:
    labels = {"served_by": served_by, "reason": reason}
    return REGISTRY.get_sample_value("asanoha_replica_reads_total", labels) or 0.0


def standby_data_directory() -> str:
    engine = create_engine(replica_server_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SHOW data_directory")).scalar_one())
    finally:
        engine.dispose()


def stop_standby(data: str) -> None:
    version = Path(data).name.rsplit("-", 1)[-1]
    pg_ctl = f"/usr/lib/postgresql/{version}/bin/pg_ctl"
    subprocess.run(
        ["runuser", "-u", "postgres", "--", pg_ctl, "-D", data, "-m", "fast", "stop"],
        check=True,
        capture_output=True,
    )


@pytest.fixture(autouse=True)
def standby_lock() -> Iterator[None]:
    """No other suite reads the standby while this test stops it."""
    with standby_to_ourselves():
        yield


def test_a_stopped_standby_is_bypassed_until_it_is_back(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[notes], settings={"replica_max_lag": 60}, replica=True)
    written = stack.http.write("notes:write:note:create", {"title": "kept"}, TestUsers.admin)
    assert written.status_code == 200, written.text
    stack.wait_for_replica()
    before = served("replica")
    assert query(stack) == ["kept"]
    assert served("replica") == before + 1

    stop_standby(standby_data_directory())
    try:
        unavailable = served("primary", "unavailable")
        # Every call answers, from the primary.
        assert query(stack) == ["kept"]
        assert query(stack) == ["kept"]
        assert served("primary", "unavailable") == unavailable + 2
    finally:
        subprocess.run([str(ROOT / "scripts" / "replica.sh")], check=True, capture_output=True)
    stack.wait_for_replica()
    # The standby is tried again after its pause, and serves.
    deadline = time.monotonic() + 30
    before = served("replica")
    while served("replica") == before and time.monotonic() < deadline:
        assert query(stack) == ["kept"]
        time.sleep(0.5)
    assert served("replica") > before


def query(stack: Any) -> Any:
    stack.http.client.cookies.clear()
    response = stack.http.query(TITLES, {}, TestUsers.admin)
    assert response.status_code == 200, response.text
    return response.json()["data"]
