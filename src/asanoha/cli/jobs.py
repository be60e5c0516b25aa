"""``asanoha jobs``: recent attempts and failures, retry a failed job, prune finished rows."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import uses_embedded_broker
from asanoha.platform.errors import AsanohaError
from asanoha.platform.model import SessionUser
from asanoha.platform.service.job_operations import (
    list_failed_jobs,
    list_job_runs,
    prune_job_rows,
    retry_failed_job,
)

jobs = typer.Typer(help="Background jobs: recent attempts and failures, retry, prune.")

LimitOption = Annotated[int, typer.Option(min=1, help="How many, newest first.")]


@jobs.command()
def runs(
    app: AppOption,
    failed: Annotated[bool, typer.Option(help="Only attempts that failed for good.")] = False,
    limit: LimitOption = 20,
) -> None:
    """The newest job attempts: job, task id, attempt, status, start, end, error."""
    loaded = load_app(app)
    with loaded.database.connect() as conn:
        found = list_job_runs(conn, loaded.service.tables, limit=limit, failed_only=failed)
    table = Table()
    for column in ("job", "task", "attempt", "status", "started", "finished", "error"):
        table.add_column(column)
    for run in found:
        table.add_row(
            run.job_qn,
            run.task_id,
            str(run.attempt),
            run.status,
            f"{run.started_at:%Y-%m-%d %H:%M:%S}",
            "" if run.finished_at is None else f"{run.finished_at:%Y-%m-%d %H:%M:%S}",
            run.error.splitlines()[0] if run.error else "",
        )
    Console().print(table, highlight=False)


@jobs.command()
def failed(app: AppOption, limit: LimitOption = 20) -> None:
    """Jobs that failed for good, newest first: the ids ``asanoha jobs retry`` takes."""
    loaded = load_app(app)
    with loaded.database.connect() as conn:
        found = list_failed_jobs(conn, loaded.service.tables, limit=limit)
    table = Table()
    # The id is what ``retry`` takes: never wrapped, so it can be copied.
    table.add_column("id", no_wrap=True)
    for column in ("job", "tenant", "attempts", "failed at", "last error"):
        table.add_column(column)
    for job in found:
        table.add_row(
            str(job.id),
            job.job_qn,
            job.tenant_id or "",
            str(job.attempt),
            "" if job.finished_at is None else f"{job.finished_at:%Y-%m-%d %H:%M:%S}",
            job.last_error.splitlines()[0] if job.last_error else "",
        )
    Console().print(table, highlight=False)


@jobs.command()
def retry(
    job_id: Annotated[str, typer.Argument(help="The job row's id (its Celery task id).")],
    app: AppOption,
) -> None:
    """Run a job that failed for good again, from its stored payload and headers (tenant and
    write origin are kept).

    The attempt count starts again at 0, so the job gets every retry it declares once more.
    A run row with status ``requeued`` records the retry. The job is published at once; on
    the in-process broker (``memory://``) the relay of the running ``asanoha serve`` sends it.
    Exits 1 when the id is unknown or the job is pending, running or succeeded.
    """
    try:
        row_id = uuid.UUID(job_id)
    except ValueError:
        typer.echo(f"{job_id!r} is not a job id (a UUID, as asanoha jobs failed lists)", err=True)
        raise typer.Exit(1) from None
    loaded = load_app(app)
    service = loaded.service
    # The in-process broker of this command reaches no worker: the serving process's relay
    # publishes the row instead.
    publish = service.publisher is not None and not uses_embedded_broker(loaded)
    operator = SessionUser.system(loaded.settings.default_tenant)
    try:
        with service.unit_of_work(operator) as request:
            retried = retry_failed_job(
                request,
                service.tables,
                row_id,
                registry=service.registry,
                requested_by="asanoha jobs retry",
                publish=publish,
            )
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    how = "published" if publish else "left for the relay of a running worker"
    typer.echo(
        f"{retried.job_qn} {retried.id}: pending again after attempt {retried.failed_attempt} "
        f"failed; {how}"
    )


@jobs.command()
def prune(
    app: AppOption,
    older_than_days: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Delete finished job rows older than this (default: ASANOHA_JOB_RETENTION_DAYS).",
        ),
    ] = None,
) -> None:
    """Delete finished job rows and their run rows, as beat's hourly prune does."""
    loaded = load_app(app)
    days = loaded.settings.job_retention_days if older_than_days is None else older_than_days
    with loaded.database.begin() as conn:
        deleted = prune_job_rows(conn, loaded.service.tables, days)
    typer.echo(f"pruned {deleted} finished job row(s) older than {days:g} day(s)")
