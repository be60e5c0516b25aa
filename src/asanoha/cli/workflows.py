"""``asanoha workflows``: list runs, show one, start a manual workflow, cancel a run, retry a
failed one, approve a step; on the same functions as ``App.workflows`` and the ``workflow-admin`` handlers."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import uses_embedded_broker
from asanoha.cli.listings import JsonOption, payload_option, print_json, print_table
from asanoha.platform.errors import AsanohaError

workflows = typer.Typer(help="Workflow runs: list, show, start, cancel, retry, approve.")

T = TypeVar("T")
RunArgument = Annotated[str, typer.Argument(help="The run's id.")]


@workflows.command()
def runs(
    app: AppOption,
    state: Annotated[
        str | None,
        typer.Option(help="Only runs in this state: running, succeeded, failed, cancelled."),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option(help="Only runs of this workflow (feature:workflow:name).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Runs of every tenant, newest first: the ids 'show', 'cancel' and 'retry' take."""
    loaded = load_app(app)
    found = loaded.workflows.runs(state=state, workflow_qn=workflow, limit=limit)
    if as_json:
        print_json({"runs": [dataclasses.asdict(run) for run in found]})
        return
    print_table(
        ("id", "workflow", "tenant", "state", "failed step", "started", "error"),
        (
            (
                str(run.id),
                run.workflow_qn,
                run.tenant_id,
                run.state,
                run.failed_step or "",
                run.created_at.isoformat(timespec="seconds") if run.created_at else "",
                (run.error or "").splitlines()[-1] if run.error else "",
            )
            for run in found
        ),
        no_wrap=("id",),
    )


@workflows.command()
def show(run_id: RunArgument, app: AppOption, as_json: JsonOption = False) -> None:
    """A run: its state, and each step's state, attempts, result or error."""
    loaded = load_app(app)
    run = _or_exit(lambda: loaded.workflows.get(run_id))
    if as_json:
        print_json(dataclasses.asdict(run))
        return
    typer.echo(f"{run.workflow} {run.id}: {run.state}")
    if run.error:
        typer.echo(f"  failed at {run.failed_step} item {run.failed_item}: {run.error}")
    print_table(
        ("step", "state", "attempts", "items", "result or error"),
        (
            (
                step.name,
                step.state,
                str(step.attempts),
                str(len(step.items)),
                step.error or json.dumps(step.result, default=str)[:200],
            )
            for step in run.steps.values()
        ),
    )


@workflows.command()
def start(
    workflow_qn: Annotated[str, typer.Argument(help="The workflow (feature:workflow:name).")],
    app: AppOption,
    payload: Annotated[str, typer.Option(help="The run's payload, a JSON object.")] = "{}",
) -> None:
    """Start a run of a workflow as the operator tenant's system user; prints its id."""
    body = payload_option(payload)
    loaded = load_app(app)
    run_id = _or_exit(lambda: loaded.workflows.start(workflow_qn, body))
    typer.echo(f"{workflow_qn} {run_id}: running")


@workflows.command()
def cancel(run_id: RunArgument, app: AppOption) -> None:
    """Cancel a running run: its steps not yet started never start, its running ones are
    asked to stop. Exits 1 for an unknown run."""
    loaded = load_app(app)
    run = _or_exit(lambda: loaded.workflows.cancel(run_id))
    typer.echo(f"{run.workflow} {run.id}: {run.state}")


@workflows.command()
def retry(run_id: RunArgument, app: AppOption) -> None:
    """Run a failed run again from where it stopped: the items that did not succeed run
    again, what succeeded stays done. Exits 1 when the run is unknown or not failed."""
    loaded = load_app(app)
    # The in-process broker of this command reaches no worker: the serving process's relay
    # publishes the rows instead.
    publish = loaded.service.publisher is not None and not uses_embedded_broker(loaded)
    run = _or_exit(lambda: loaded.workflows.retry(run_id, publish=publish))
    typer.echo(f"{run.workflow} {run.id}: {run.state} again")


@workflows.command()
def approve(
    run_id: RunArgument,
    step: Annotated[str, typer.Argument(help="The approval step the run waits at.")],
    app: AppOption,
    by: Annotated[str, typer.Option(help="Who approves: a person's user id.")],
    role: Annotated[
        list[str] | None,
        typer.Option(help="A role of the approver (repeat): what the step's access= asks."),
    ] = None,
) -> None:
    """Approve an approval step a run waits at, as the person --by of the run's tenant
    (recorded with the channel 'cli'); the steps after it start. Exits 1 when the run does
    not wait there, or the step's access= does not admit the approver."""
    from asanoha.platform.model import SessionUser

    loaded = load_app(app)
    run = _or_exit(lambda: loaded.workflows.get(run_id))
    approver = SessionUser.of(by, run.tenant_id, role or [])
    publish = loaded.service.publisher is not None and not uses_embedded_broker(loaded)
    approved = _or_exit(
        lambda: loaded.workflows.approve(run_id, step, approver, channel="cli", publish=publish)
    )
    typer.echo(f"{approved.workflow} {approved.id}: {step} approved by {by}")


def _or_exit(call: Callable[[], T]) -> T:
    """``call()``, or its error's reason and message on stderr and exit 1."""
    try:
        return call()
    except AsanohaError as error:
        typer.echo(f"{error.reason}: {error.message}", err=True)
        raise typer.Exit(1) from None
