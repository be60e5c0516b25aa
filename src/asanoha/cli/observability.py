"""What ``serve``, ``worker`` and ``beat`` set up before they run: the log format and,
when the ``OTEL_*`` variables ask for it, tracing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from asanoha.app import App
    from asanoha.platform.log_format import LogFormat

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).


def set_up_observability(app: App, role: str) -> LogFormat:
    """Turn tracing on as ``OTEL_*`` says (service name ``<queue prefix>-<role>`` unless
    ``OTEL_SERVICE_NAME``), and return the log format ``ASANOHA_LOG_FORMAT`` chooses.
    Exits when traces are asked for without ``asanoha[otel]`` or with an unknown exporter."""
    from asanoha.platform import telemetry
    from asanoha.platform.log_format import resolve_log_format

    try:
        telemetry.configure_from_environment(
            f"{app.settings.queue_prefix}-{role}",
            engines=[app.database.engine],
            trace_sql=app.settings.trace_sql,
        )
    except (telemetry.TelemetryUnavailableError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    return resolve_log_format(app.settings.log_format)
