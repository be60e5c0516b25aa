"""``asanoha worker``: a Celery worker for the application's lanes."""

from __future__ import annotations

from typing import Annotated

import typer

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
    """Run a Celery worker consuming every lane queue (refuses a schema that is behind)."""
    from asanoha.workers.lanes import lane_queues

    loaded = load_app(app)
    require_current_schema(loaded, app)
    if metrics_port is not None:
        from asanoha.cli.worker_metrics import start_worker_metrics

        start_worker_metrics(metrics_port, loaded.registry)
    queues = ",".join(lane_queues(loaded.settings))
    loaded.celery.worker_main(
        ["worker", f"--concurrency={concurrency}", f"--queues={queues}", "--loglevel=INFO"]
    )
