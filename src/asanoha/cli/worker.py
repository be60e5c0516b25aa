"""``asanoha worker`` and ``asanoha beat``: the processes an operator runs for jobs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from asanoha.app import App
from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.schema_gate import require_current_schema


def worker(
    app: AppOption,
    concurrency: Annotated[int, typer.Option(help="Worker processes.")] = 2,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Serve Prometheus job metrics of every pool process on this port."),
    ] = None,
) -> None:
    """Run a Celery worker consuming every lane queue, with the outbox relay in its main
    process (refuses a schema that is behind)."""
    from asanoha.workers.lanes import lane_queues

    loaded = load_app(app)
    require_current_schema(loaded, app)
    _refuse_memory_broker(loaded, "worker")
    # The pool processes are forked from this one: it must hold no database connection
    # they would share (each pool process also drops what it inherited, see CeleryJobs).
    loaded.database.dispose()
    if metrics_port is not None:
        from asanoha.cli.worker_metrics import start_worker_metrics

        start_worker_metrics(metrics_port, loaded.registry)
    queues = ",".join(lane_queues(loaded.settings))
    loaded.celery.worker_main(
        [
            "worker",
            f"--concurrency={concurrency}",
            f"--queues={queues}",
            f"--hostname={loaded.settings.queue_prefix}@%h-{os.getpid()}",
            "--loglevel=INFO",
        ]
    )


def beat(
    app: AppOption,
    schedule: Annotated[
        Path, typer.Option(help="File where beat keeps the time of each entry's last run.")
    ] = Path("celerybeat-schedule"),
) -> None:
    """Run Celery beat: the cron jobs and the prune of finished job rows. Run exactly one."""
    loaded = load_app(app)
    _refuse_memory_broker(loaded, "beat")
    loaded.celery.start(["beat", f"--schedule={schedule}", "--loglevel=INFO"])


def _refuse_memory_broker(app: App, command: str) -> None:
    if app.settings.broker_url.startswith("memory://"):
        typer.echo(
            f"asanoha {command} needs a broker other processes reach; the in-process "
            "memory:// broker serves only 'asanoha serve' and 'asanoha demo'. Set "
            "ASANOHA_BROKER_URL (redis://... or amqp://...).",
            err=True,
        )
        raise typer.Exit(1)
