"""``asanoha jobs``: recent attempts, failures and jobs still to run; cancel a job, retry a
failed one, run one by hand; prune finished rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import uses_embedded_broker
from asanoha.cli.listings import JsonOption, payload_option, print_json, print_table
from asanoha.platform.errors import AsanohaError, ValidationError

if TYPE_CHECKING:
    from asanoha.platform.service.job_listings import JobRun

# The service layer is imported inside the commands: ``asanoha --help`` and
# ``asanoha jobs failed --help`` import this module (see ``asanoha.cli``).

jobs = typer.Typer(
    help=(
        "Background jobs: recent attempts, failures, pending jobs, cancel, retry, run, pause, "
        "resume, prune."
    )
)

LimitOption = Annotated[int, typer.Option(min=1, help="How many, newest first.")]


@jobs.command()
def runs(
    app: AppOption,
    failed: Annotated[bool, typer.Option(help="Only attempts that failed for good.")] = False,
    limit: LimitOption = 20,
    as_json: JsonOption = False,
    logs: Annotated[
        str | None,
        typer.Option(
            metavar="JOB_ID",
            help="Every attempt of this job (its row id) with the lines it logged (ctx.log).",
        ),
    ] = None,
) -> None:
    """The newest job attempts: job, task id, attempt, status, start, end, error."""
    from asanoha.platform.service.job_listings import list_job_runs

    job_id = None if logs is None else _job_id(logs)
    loaded = load_app(app)
    with loaded.database.connect() as conn:
        found = list_job_runs(
            conn, loaded.service.tables, limit=limit, failed_only=failed, job_id=job_id
        )
    if as_json:
        print_json({"runs": [dataclasses.asdict(run) for run in found]})
        return
    if job_id is not None:
        _print_logs(job_id, found)
        return
    print_table(
        ("job", "task", "attempt", "status", "started", "finished", "error"),
        (
            (
                run.job_qn,
                run.task_id,
                str(run.attempt),
                run.status,
                _when(run.started_at),
                _when(run.finished_at),
                _first_line(run.error),
            )
            for run in found
        ),
        no_wrap=("task",),
    )


def _print_logs(job_id: uuid.UUID, found: list[JobRun]) -> None:
    """Each attempt of one job, oldest first, with what it logged."""
    if not found:
        typer.echo(f"no attempt of job {job_id} has ended yet")
        return
    for run in reversed(found):
        typer.echo(
            f"{run.job_qn} {run.task_id} attempt {run.attempt}: {run.status} "
            f"({_when(run.started_at)} - {_when(run.finished_at)})"
        )
        if run.error:
            typer.echo(f"  error: {_first_line(run.error)}")
        for line in (run.logs or "(nothing logged)").splitlines():
            typer.echo(f"  {line}")


@jobs.command()
def failed(app: AppOption, limit: LimitOption = 20, as_json: JsonOption = False) -> None:
    """Jobs that failed for good, newest first: the ids 'asanoha jobs retry' takes."""
    from asanoha.platform.service.job_listings import list_failed_jobs

    loaded = load_app(app)
    with loaded.database.connect() as conn:
        found = list_failed_jobs(conn, loaded.service.tables, limit=limit)
    if as_json:
        print_json({"jobs": [dataclasses.asdict(job) for job in found]})
        return
    print_table(
        ("id", "job", "tenant", "attempts", "failed at", "last error"),
        (
            (
                str(job.id),
                job.job_qn,
                job.tenant_id or "",
                str(job.attempt),
                _when(job.finished_at),
                _first_line(job.last_error),
            )
            for job in found
        ),
        # The id is what ``retry`` takes: never wrapped, so it can be copied.
        no_wrap=("id",),
    )


@jobs.command()
def pending(app: AppOption, limit: LimitOption = 50, as_json: JsonOption = False) -> None:
    """Jobs still to run (pending) or running, oldest first: state, the pause that holds it
    (its job, or lane:<name>: no attempt starts until 'asanoha jobs resume'), attempts so
    far, when the next attempt may start and when its message was sent."""
    from asanoha.platform.service.job_listings import list_pending_jobs

    loaded = load_app(app)
    with loaded.database.connect() as conn:
        found = list_pending_jobs(
            conn, loaded.service.tables, limit=limit, lanes=loaded.service.job_lanes
        )
    if as_json:
        print_json({"jobs": [dataclasses.asdict(job) for job in found]})
        return
    print_table(
        ("id", "job", "tenant", "state", "paused", "attempts", "not before", "sent", "last error"),
        (
            (
                str(job.id),
                job.job_qn,
                job.tenant_id or "",
                job.state,
                job.pause or "",
                str(job.attempt),
                _when(job.not_before),
                _when(job.published_at) or "not yet",
                _first_line(job.last_error),
            )
            for job in found
        ),
        no_wrap=("id",),
    )


def _when(moment: dt.datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


def _first_line(text: str | None) -> str:
    return text.splitlines()[0] if text else ""


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
    row_id = _job_id(job_id)
    loaded = load_app(app)
    service = loaded.service
    # The in-process broker of this command reaches no worker: the serving process's relay
    # publishes the row instead.
    publish = service.publisher is not None and not uses_embedded_broker(loaded)
    try:
        retried = loaded.jobs.retry(row_id, requested_by="asanoha jobs retry", publish=publish)
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    how = "published" if publish else "left for the relay of a running worker"
    typer.echo(
        f"{retried.job_qn} {retried.id}: pending again after attempt {retried.failed_attempt} "
        f"failed; {how}"
    )


def _job_id(job_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(job_id)
    except ValueError:
        typer.echo(f"{job_id!r} is not a job id (a UUID, as asanoha jobs pending lists)", err=True)
        raise typer.Exit(1) from None


@jobs.command()
def cancel(
    job_id: Annotated[str, typer.Argument(help="The job row's id (its Celery task id).")],
    app: AppOption,
) -> None:
    """Cancel a job: a pending job never runs (a message delivered later is acknowledged
    without running); a running attempt is asked to stop (the job sees
    ``ctx.cancel_requested``; ``ctx.checkpoint()`` raises ``JobCancelled``) and no further
    attempt follows. Exits 1 when the id is unknown or the job has finished.
    """
    row_id = _job_id(job_id)
    loaded = load_app(app)
    try:
        cancelled = loaded.jobs.cancel(row_id)
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    if cancelled.state == "running":
        typer.echo(f"{cancelled.job_qn} {cancelled.id}: running; asked to stop")
    else:
        typer.echo(f"{cancelled.job_qn} {cancelled.id}: cancelled")


@jobs.command()
def run(
    job_qn: Annotated[str, typer.Argument(help="The job's qualified name (feature:job:name).")],
    app: AppOption,
    payload: Annotated[
        str, typer.Option(help="The payload, a JSON object; checked against the job's schema=.")
    ] = "{}",
    delay: Annotated[
        float | None, typer.Option(min=0, help="Seconds before its first attempt may start.")
    ] = None,
) -> None:
    """Run a job by hand (trigger ``manual``), as the default tenant's system user.

    The payload is validated against the job's ``schema=``: a payload it refuses prints the
    field errors and exits 2, enqueuing nothing. An unknown job exits 1. The job is
    published at once; on the in-process broker (``memory://``) the relay of the running
    ``asanoha serve`` sends it.
    """
    body = payload_option(payload)
    loaded = load_app(app)
    publish = loaded.service.publisher is not None and not uses_embedded_broker(loaded)
    try:
        job_id = loaded.jobs.run(job_qn, body, delay=delay, publish=publish)
    except ValidationError as error:
        typer.echo(f"{error.code}: {job_qn} refused the payload", err=True)
        for field in error.details.get("fields", []):
            typer.echo(f"  {field.get('path')}: {field.get('message')}", err=True)
        raise typer.Exit(2) from None
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
    how = "published" if publish else "left for the relay of a running worker"
    when = f", starts in {delay:g} s" if delay else ""
    typer.echo(f"{job_qn} {job_id}: pending{when}; {how}")


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
    from asanoha.platform.service.job_operations import prune_job_rows

    loaded = load_app(app)
    days = loaded.settings.job_retention_days if older_than_days is None else older_than_days
    with loaded.database.begin() as conn:
        deleted = prune_job_rows(conn, loaded.service.tables, days)
    typer.echo(f"pruned {deleted} finished job row(s) older than {days:g} day(s)")


TargetArgument = Annotated[
    str, typer.Argument(help="A job's qualified name, or a lane (worker, api, lane:<name>).")
]


@jobs.command()
def pause(target: TargetArgument, app: AppOption) -> None:
    """Pause a job or a lane in every tenant: its jobs stay pending and no worker claims
    them until ``asanoha jobs resume``; attempts already running run on. ``drain()`` does
    not wait for a paused job's rows and names them. Exits 1 for an unknown job or lane.
    """
    loaded = load_app(app)
    try:
        change = loaded.jobs.pause(target, paused_by="cli")
    except LookupError as error:
        typer.echo(str(error).strip("'\""), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{change.target}: paused" if change.changed else f"{change.target}: was paused")


@jobs.command()
def resume(target: TargetArgument, app: AppOption) -> None:
    """Resume a paused job or lane: its waiting jobs are published at once (by the relay
    of a running worker). Exits 1 for an unknown job or lane."""
    loaded = load_app(app)
    try:
        change = loaded.jobs.resume(target)
    except LookupError as error:
        typer.echo(str(error).strip("'\""), err=True)
        raise typer.Exit(1) from None
    if not change.changed:
        typer.echo(f"{change.target}: was not paused")
        return
    typer.echo(f"{change.target}: resumed; {change.woken} waiting job(s) due now")


@jobs.command()
def pauses(app: AppOption, as_json: JsonOption = False) -> None:
    """The paused jobs and lanes."""
    loaded = load_app(app)
    found = loaded.jobs.pauses()
    if as_json:
        print_json(
            {
                "pauses": [
                    {"target": p.target, "paused_at": p.paused_at.isoformat(), "by": p.paused_by}
                    for p in found
                ]
            }
        )
        return
    print_table(
        ("target", "paused", "by"),
        ((p.target, _when(p.paused_at), p.paused_by or "") for p in found),
    )
