"""Run rows on SQLite (no services): one row per attempt, whichever write lands first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from asanoha.platform.model import Registry
from asanoha.platform.store import Database, create_all
from asanoha.workers.run_records import RunRecorder


@pytest.fixture
def recorder(tmp_path: Path) -> Any:
    database = Database(f"sqlite+pysqlite:///{tmp_path}/runs.sqlite3")
    tables = create_all(Registry([]), database)
    recorder = RunRecorder(database, tables)
    yield recorder, database, tables
    recorder.close()
    database.dispose()


def _rows(database: Database, tables: Any) -> list[tuple[Any, ...]]:
    runs = tables.job_runs
    query = select(runs.c.task_id, runs.c.attempt, runs.c.status, runs.c.error)
    with database.connect() as conn:
        return [tuple(row) for row in conn.execute(query.order_by(runs.c.id))]


def test_a_finished_attempt_is_one_row(recorder):
    recorder_, database, tables = recorder
    run = recorder_.start("f:job:x", "t1", "acme", 1)
    recorder_.finish(run, "retrying", "RuntimeError: boom")
    run = recorder_.start("f:job:x", "t1", "acme", 2)
    recorder_.finish(run, "succeeded")
    recorder_.flush()
    assert _rows(database, tables) == [
        ("t1", 1, "retrying", "RuntimeError: boom"),
        ("t1", 2, "succeeded", None),
    ]


def test_a_late_running_row_never_overwrites_the_end_of_its_attempt(recorder):
    recorder_, database, tables = recorder
    run = recorder_.start("f:job:x", "t1", "acme", 1)
    recorder_.finish(run, "succeeded")
    recorder_.flush()
    recorder_._write([], [run])  # its running row, written after its end
    assert _rows(database, tables) == [("t1", 1, "succeeded", None)]


def test_a_redelivered_attempt_takes_over_the_row_of_the_lost_one(recorder):
    recorder_, database, tables = recorder
    lost = recorder_.start("f:job:x", "t1", "acme", 1)
    recorder_._write([], [lost])  # its worker died while it ran
    again = recorder_.start("f:job:x", "t1", "acme", 1)
    recorder_._write([], [again])
    assert _rows(database, tables) == [("t1", 1, "running", None)]
    recorder_.finish(again, "succeeded")
    recorder_.flush()
    assert _rows(database, tables) == [("t1", 1, "succeeded", None)]
