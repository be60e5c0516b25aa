"""Listing commands for people and for scripts: ``--json`` prints one JSON document, a table
written to a pipe is never cut, and a table on a terminal takes the terminal's width."""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import re
import select
import subprocess
import uuid

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.pool import NullPool

from asanoha.platform.store import platform_tables
from asanoha.platform.store.database import normalize_url
from tests.integration.cli.conftest import Project, asanoha_script

LONG_ERROR = "ValueError: " + "the upstream service answered something unexpected " * 6


def insert_jobs(project: Project) -> dict[str, str]:
    """A failed job with a long error, a pending job never sent, a run row: their ids."""
    now = dt.datetime.now(dt.UTC)
    ids = {"failed": str(uuid.uuid4()), "pending": str(uuid.uuid4())}
    tables = platform_tables()
    common = {"payload": {}, "headers": {"tenant_id": "acme"}, "not_before": now}
    engine = create_engine(normalize_url(project.database.url), poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(
            insert(tables.outbox),
            [
                {
                    **common,
                    "id": uuid.UUID(ids["failed"]),
                    "job_qn": "shop:job:sync",
                    "state": "failed",
                    "attempt": 3,
                    "relay_after": now,
                    "last_error": LONG_ERROR,
                    "created_at": now,
                    "finished_at": now,
                },
                {
                    **common,
                    "id": uuid.UUID(ids["pending"]),
                    "job_qn": "shop:job:mail",
                    "state": "pending",
                    "attempt": 0,
                    "relay_after": now,
                    "last_error": None,
                    "created_at": now,
                    "finished_at": None,
                },
            ],
        )
        conn.execute(
            insert(tables.job_runs).values(
                job_qn="shop:job:sync",
                task_id=ids["failed"],
                tenant_id="acme",
                attempt=3,
                status="failed",
                error=LONG_ERROR,
                started_at=now,
                finished_at=now,
            )
        )
    engine.dispose()
    return ids


@pytest.fixture
def jobs_project(project: Project) -> tuple[Project, dict[str, str]]:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    return project, insert_jobs(project)


@pytest.mark.parametrize(
    ("command", "key"),
    [
        (("jobs", "runs"), "runs"),
        (("jobs", "failed"), "jobs"),
        (("jobs", "pending"), "jobs"),
        (("consumers", "status"), "consumers"),
        (("tools",), "tools"),
    ],
)
def test_every_listing_prints_one_json_document(
    jobs_project: tuple[Project, dict[str, str]], command: tuple[str, ...], key: str
) -> None:
    project, _ = jobs_project
    done = project.run(*command, "--app", "shop:app", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert list(document) == [key] and isinstance(document[key], list)
    # One line-terminated document: a shell prompt or `>> file` does not join the next text.
    assert done.stdout.endswith("}\n") and not done.stdout.endswith("\n\n")


def test_json_of_the_jobs_carries_ids_timestamps_and_whole_errors(
    jobs_project: tuple[Project, dict[str, str]],
) -> None:
    project, ids = jobs_project
    (failed,) = json.loads(project.run("jobs", "failed", "--app", "shop:app", "--json").stdout)[
        "jobs"
    ]
    assert failed["id"] == ids["failed"] and failed["last_error"] == LONG_ERROR
    dt.datetime.fromisoformat(failed["finished_at"])
    (pending,) = json.loads(project.run("jobs", "pending", "--app", "shop:app", "--json").stdout)[
        "jobs"
    ]
    assert (pending["id"], pending["state"], pending["published_at"]) == (
        ids["pending"],
        "pending",
        None,
    )


def test_a_table_written_to_a_pipe_is_not_cut(jobs_project: tuple[Project, dict[str, str]]) -> None:
    project, ids = jobs_project
    done = project.run("jobs", "failed", "--app", "shop:app")  # COLUMNS=200, stdout a pipe
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if ids["failed"] in line]
    assert LONG_ERROR.strip() in row
    pending = project.run("jobs", "pending", "--app", "shop:app").stdout
    assert ids["pending"] in pending and "not yet" in pending


def test_a_table_on_a_terminal_takes_its_width(
    jobs_project: tuple[Project, dict[str, str]],
) -> None:
    project, ids = jobs_project
    env = {**project.env(), "COLUMNS": "120", "LINES": "40"}
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [asanoha_script(), "jobs", "failed", "--app", "shop:app"],
        cwd=project.folder,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    output = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command has exited
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(leader)
    assert process.returncode == 0
    # Without the terminal's colour codes.
    lines = re.sub(r"\x1b\[[0-9;]*m", "", output.decode()).replace("\r", "").splitlines()
    assert max(len(line) for line in lines) <= 120
    # The id is never wrapped, the error is folded onto more lines.
    assert any(ids["failed"] in line for line in lines)
    assert LONG_ERROR.strip() not in "\n".join(lines)
