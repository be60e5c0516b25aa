"""``asanoha serve``: the HTTP API under uvicorn."""

from __future__ import annotations

import os
import tempfile
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asanoha.cli.api_workers import run_api_workers
from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import (
    announce_development_token,
    embedded_worker,
    use_process_secret,
    uses_embedded_broker,
)
from asanoha.cli.observability import set_up_observability
from asanoha.cli.schema_gate import require_current_schema
from asanoha.cli.signing import refuse_insecure_signing, refuse_plaintext_personal_data

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from fastapi import FastAPI

    from asanoha.app import App

#: How ``serve --workers N`` and ``serve --reload`` tell the processes they start which
#: application to load.
APP_VARIABLE = "ASANOHA_SERVE_APP"
#: How ``serve --reload`` tells its server process the level of the job lines it prints.
LOG_LEVEL_VARIABLE = "ASANOHA_SERVE_LOG_LEVEL"
#: The import string of the factory ``serve --workers N`` processes call.
HTTP_APP_FACTORY = "asanoha.cli.serve:http_app_from_environment"
#: The import string of the factory the server process of ``serve --reload`` calls.
RELOAD_APP_FACTORY = "asanoha.cli.serve:http_app_for_reload"


class LogLevel(StrEnum):
    """uvicorn's log levels."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"
    TRACE = "trace"


def serve(
    app: AppOption,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: Annotated[
        int, typer.Option(min=1, help="API processes (uvicorn workers) sharing the port.")
    ] = 1,
    reload: Annotated[
        bool,
        typer.Option(
            help="Restart when a Python file under the working directory changes "
            "(development only: ASANOHA_DEVELOPMENT=true or the embedded default)."
        ),
    ] = False,
    log_level: Annotated[
        LogLevel, typer.Option(help="uvicorn's log level, and the level of the job lines.")
    ] = LogLevel.INFO,
    proxy_headers: Annotated[
        bool,
        typer.Option(
            help="Take the client's address and scheme from X-Forwarded-For and "
            "X-Forwarded-Proto, when the proxy is one of --forwarded-allow-ips."
        ),
    ] = True,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated addresses of the proxies whose forwarded headers are "
            "trusted ('*': any). Default: $FORWARDED_ALLOW_IPS or 127.0.0.1.",
            show_default=False,
        ),
    ] = None,
    root_path: Annotated[
        str,
        typer.Option(
            help="The path prefix under which a proxy serves the API (for example /api-v1)."
        ),
    ] = "",
) -> None:
    """Serve the HTTP API with uvicorn.

    Refuses a database whose schema is behind (run asanoha migrate); on SQLite it creates
    and upgrades the schema itself. On the in-process broker (memory://, the default) it also
    runs the jobs and prints what they log and how each attempt ends. Without
    ASANOHA_JWT_SECRET, on the embedded default (SQLite and memory://) or with
    ASANOHA_DEVELOPMENT=true, one worker signs with a random secret of its process and prints a
    development token; otherwise it refuses to start, as it does for a short secret or an
    unsupported ASANOHA_JWT_ALGORITHM. `uvicorn shop:app.http` serves the same API (without
    the jobs of the embedded default).
    """
    import uvicorn

    from asanoha.platform.log_format import configure_logging, logging_config

    loaded = load_app(app)
    if reload and workers > 1:
        raise typer.BadParameter("--reload runs one server process", param_hint="--workers")
    if reload and not (loaded.settings.development or loaded.settings.uses_embedded_default):
        raise typer.BadParameter(
            "--reload is for development: set ASANOHA_DEVELOPMENT=true, or run on the "
            "embedded default (SQLite and the in-process broker)",
            param_hint="--reload",
        )
    # One worker replaces the placeholder with a secret of its process before the app is
    # built; several could not share it.
    minted = workers == 1 and use_process_secret(loaded)
    refuse_insecure_signing(loaded)
    require_current_schema(loaded, app)
    server = server_options(log_level, proxy_headers, forwarded_allow_ips, root_path)
    if set_up_observability(loaded, "api") == "json":
        # This process, and each uvicorn process (workers, reload), which sets up its own;
        # before anything is told (a master key made, where the jobs run), so that it is
        # told in JSON lines too.
        level = "DEBUG" if log_level == LogLevel.TRACE else log_level.value.upper()
        configure_logging("json", level)
        server["log_config"] = logging_config("json", level)
    refuse_plaintext_personal_data(loaded, "serve")
    if reload:
        if minted:
            announce_development_token(loaded)
            # The server process is started anew on every change: it signs with this secret.
            os.environ["ASANOHA_JWT_SECRET"] = loaded.settings.jwt_secret
        loaded.close()
        os.environ[APP_VARIABLE] = app
        os.environ[LOG_LEVEL_VARIABLE] = log_level.value
        uvicorn.run(
            RELOAD_APP_FACTORY,
            factory=True,
            reload=True,
            reload_dirs=[os.getcwd()],
            host=host,
            port=port,
            **server,
        )
        return
    api = with_console(loaded)
    if minted:
        announce_development_token(loaded)
    if workers == 1:
        with embedded_worker(loaded, log_level.value):
            uvicorn.run(api, host=host, port=port, **server)
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
    run_api_workers(HTTP_APP_FACTORY, host=host, port=port, workers=workers, **server)


def server_options(
    log_level: LogLevel, proxy_headers: bool, forwarded_allow_ips: str | None, root_path: str
) -> dict[str, Any]:
    """The uvicorn settings the options name (``forwarded_allow_ips`` only when given, so
    uvicorn's own default and ``$FORWARDED_ALLOW_IPS`` hold otherwise)."""
    options: dict[str, Any] = {
        "log_level": log_level.value,
        "proxy_headers": proxy_headers,
        "root_path": root_path,
    }
    if forwarded_allow_ips is not None:
        options["forwarded_allow_ips"] = forwarded_allow_ips
    return options


def http_app_from_environment() -> FastAPI:
    """The HTTP app of the application ``ASANOHA_SERVE_APP`` names (in a worker of
    ``serve --workers N``)."""
    loaded = load_app(_app_reference())
    set_up_observability(loaded, "api")
    return with_console(loaded)


#: The in-process worker of the server process ``serve --reload`` starts; it ends with the
#: process, which the reloader stops on every change.
_reload_workers: list[AbstractContextManager[None]] = []


def http_app_for_reload() -> FastAPI:
    """The HTTP app of ``ASANOHA_SERVE_APP``, in the server process that ``serve --reload``
    starts anew on every change: it brings the SQLite schema up to date and, on the embedded
    default, runs the jobs as ``serve`` does."""
    reference = _app_reference()
    loaded = load_app(reference)
    require_current_schema(loaded, reference)
    set_up_observability(loaded, "api")
    api = with_console(loaded)
    if uses_embedded_broker(loaded) and (loaded.registry.jobs or loaded.consumers):
        worker = embedded_worker(loaded, os.environ.get(LOG_LEVEL_VARIABLE, "info"))
        worker.__enter__()
        _reload_workers.append(worker)
    return api


def with_console(loaded: App) -> FastAPI:
    """The app's HTTP API with the operator console at ``/console``."""
    from asanoha.console import mount_console

    return mount_console(loaded.http, loaded)


def _app_reference() -> str:
    reference = os.environ.get(APP_VARIABLE)
    if not reference:
        raise RuntimeError(f"{APP_VARIABLE} is not set: start API processes with asanoha serve")
    return reference
