"""``asanoha serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.api_workers import run_api_workers
from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import (
    announce_development_token,
    embedded_worker,
    use_process_secret,
    uses_embedded_broker,
)
from asanoha.cli.schema_gate import require_current_schema
from asanoha.cli.signing import refuse_insecure_signing

if TYPE_CHECKING:
    from fastapi import FastAPI

#: How ``serve --workers N`` tells its worker processes which application to load.
APP_VARIABLE = "ASANOHA_SERVE_APP"
#: The import string of the factory those processes call.
HTTP_APP_FACTORY = "asanoha.cli.serve:http_app_from_environment"


def serve(
    app: AppOption,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: Annotated[
        int, typer.Option(min=1, help="API processes (uvicorn workers) sharing the port.")
    ] = 1,
) -> None:
    """Serve the HTTP API with uvicorn.

    Refuses a database whose schema is behind (run asanoha migrate); on SQLite it creates
    and upgrades the schema itself. On the in-process broker (memory://, the default) it also
    runs the jobs. Without ASANOHA_JWT_SECRET, on the embedded default (SQLite and memory://)
    or with ASANOHA_DEVELOPMENT=true, one worker signs with a random secret of its process and
    prints a development token; otherwise it refuses to start, as it does for a short secret
    or an unsupported ASANOHA_JWT_ALGORITHM.
    """
    import uvicorn

    loaded = load_app(app)
    # One worker replaces the placeholder with a secret of its process before the app is
    # built; several could not share it.
    minted = workers == 1 and use_process_secret(loaded)
    refuse_insecure_signing(loaded)
    require_current_schema(loaded, app)
    api = loaded.http
    if minted:
        announce_development_token(loaded)
    if workers == 1:
        with embedded_worker(loaded):
            uvicorn.run(api, host=host, port=port)
        return
    if uses_embedded_broker(loaded) and loaded.registry.jobs:
        typer.echo(
            "asanoha serve --workers needs a broker its processes share; the in-process "
            "memory:// broker serves one process. Set ASANOHA_BROKER_URL (redis://... or "
            "amqp://...) and run asanoha worker, or serve with one worker.",
            err=True,
        )
        raise typer.Exit(1)
    # Each worker is a fresh process that imports the app itself, so it takes an import
    # string: a factory that loads the --app this process was given, passed on in the
    # environment the workers inherit.
    loaded.close()
    os.environ[APP_VARIABLE] = app
    # /metrics of any API process adds up every process (prometheus_client multiprocess mode).
    os.environ.setdefault(
        "PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="asanoha-api-metrics-")
    )
    run_api_workers(HTTP_APP_FACTORY, host=host, port=port, workers=workers)


def http_app_from_environment() -> FastAPI:
    """The HTTP app of the application ``ASANOHA_SERVE_APP`` names (in a worker of
    ``serve --workers N``)."""
    reference = os.environ.get(APP_VARIABLE)
    if not reference:
        raise RuntimeError(f"{APP_VARIABLE} is not set: start API workers with asanoha serve")
    return load_app(reference).http
