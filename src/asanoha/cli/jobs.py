"""``asanoha jobs``: recent job attempts and failures, from the job runs table."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import select

from asanoha.cli.app_loading import AppOption, load_app

jobs = typer.Typer(help="Background jobs: recent attempts and failures.")


@jobs.command()
def runs(
    app: AppOption,
    failed: Annotated[bool, typer.Option(help="Only attempts that failed for good.")] = False,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
) -> None:
    """The newest job attempts: job, task id, attempt, status, start, end, error."""
    loaded = load_app(app)
    table_def = loaded.service.tables.job_runs
    query = select(table_def).order_by(table_def.c.id.desc()).limit(limit)
    if failed:
        query = query.where(table_def.c.status == "failed")
    with loaded.database.connect() as conn:
        rows = conn.execute(query).all()
    table = Table()
    for column in ("job", "task", "attempt", "status", "started", "finished", "error"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.job_qn,
            row.task_id,
            str(row.attempt),
            row.status,
            f"{row.started_at:%Y-%m-%d %H:%M:%S}",
            "" if row.finished_at is None else f"{row.finished_at:%Y-%m-%d %H:%M:%S}",
            (row.error or "").splitlines()[0] if row.error else "",
        )
    Console().print(table, highlight=False)
