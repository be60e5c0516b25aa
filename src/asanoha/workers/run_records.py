"""``asanoha_job_runs``: one row per attempt, one statement when it starts and one when it ends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Literal

from sqlalchemy import Table, update
from sqlalchemy.dialects import postgresql, sqlite

from asanoha.platform.store import Database, Tables

FinalStatus = Literal["succeeded", "failed", "retrying"]
# Both dialects spell the upsert the same way; the portable ``insert`` has no upsert.
_INSERT: dict[str, Callable[[Table], Any]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}


def describe_error(exc: BaseException) -> str:
    """The error text stored with a run and reported by ``drain()``."""
    return f"{type(exc).__name__}: {exc}"


class RunRecorder:
    """Writes the run rows of job attempts."""

    def __init__(self, database: Database, tables: Tables) -> None:
        self._database = database
        self._table = tables.job_runs
        self._insert = _INSERT[database.dialect]

    def start(self, job_qn: str, task_id: str, tenant_id: str | None, attempt: int) -> int:
        """Record ``attempt`` as running and return its row id.

        A redelivered attempt (its worker died) takes over the row of the lost one.
        """
        now = dt.datetime.now(dt.UTC)
        statement = (
            self._insert(self._table)
            .values(
                job_qn=job_qn,
                task_id=task_id,
                tenant_id=tenant_id,
                attempt=attempt,
                status="running",
                started_at=now,
            )
            .on_conflict_do_update(
                index_elements=["task_id", "attempt"],
                set_={"status": "running", "error": None, "started_at": now, "finished_at": None},
            )
            .returning(self._table.c.id)
        )
        with self._database.begin() as conn:
            return int(conn.execute(statement).scalar_one())

    def finish(self, run_id: int, status: FinalStatus, error: str | None = None) -> None:
        """Record how the attempt ``run_id`` ended."""
        statement = (
            update(self._table)
            .where(self._table.c.id == run_id)
            .values(status=status, error=error, finished_at=dt.datetime.now(dt.UTC))
        )
        with self._database.begin() as conn:
            conn.execute(statement)
