"""``asanoha worker`` and ``asanoha beat``: the processes an operator runs for jobs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.celery_runner import (
    OWNED_GLOBAL_OPTIONS,
    refuse_memory_broker,
    refuse_owned_options,
    run_celery,
)
from asanoha.cli.observability import set_up_observability
from asanoha.cli.schema_gate import require_current_schema
from asanoha.cli.signing import refuse_insecure_signing, refuse_plaintext_personal_data

if TYPE_CHECKING:
    from asanoha.platform.log_format import LogFormat
    from asanoha.platform.model.handlers import Lane
    from asanoha.platform.settings import Settings

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).

#: Levels ``--loglevel`` takes (Celery's, any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")

#: Options of ``celery worker`` that ``asanoha worker`` sets: refused after ``--``.
OWNED_WORKER_OPTIONS: Mapping[str, str] = {
    **OWNED_GLOBAL_OPTIONS,
    "-c": "--concurrency",
    "--concurrency": "--concurrency",
    "-Q": "the queues come from --lanes",
    "--queues": "the queues come from --lanes",
    "-n": "--hostname",
    "--hostname": "--hostname",
    "-l": "--loglevel",
    "--loglevel": "--loglevel",
}


def worker(
    app: AppOption,
    concurrency: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    lanes: Annotated[
        list[str] | None,
        typer.Option(
            help="Lanes whose queues this worker consumes (worker, api); repeat the option "
            "or separate with commas. Default: every lane. Every worker also consumes the "
            "platform's queues (consumer wake-ups, cron ticks).",
            show_default=False,
        ),
    ] = None,
    loglevel: Annotated[
        str, typer.Option(help="Log level: DEBUG, INFO, WARNING, ERROR or CRITICAL.")
    ] = "INFO",
    hostname: Annotated[
        str | None,
        typer.Option(
            help="The worker's name as Flower and 'asanoha celery -- inspect' show it; "
            "Celery expands %h (host name). Default: PREFIX@%h-PID (ASANOHA_QUEUE_PREFIX, the "
            "process id).",
            show_default=False,
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Serve Prometheus job metrics of every pool process on this port."),
    ] = None,
    celery_options: Annotated[
        list[str] | None,
        typer.Argument(
            help="Further options of 'celery worker', after -- (for example: -- --without-mingle).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a Celery worker consuming the lane queues, with the outbox relay in its main
    process (refuses a schema that is behind).

    Options of 'celery worker' that asanoha does not set pass through after --, for example
    'asanoha worker --app shop:app -- --without-mingle --max-tasks-per-child=100'.
    """
    extra = list(celery_options or [])
    refuse_owned_options("worker", extra, OWNED_WORKER_OPTIONS)
    chosen_lanes = parse_lanes(lanes or [])
    level = parse_loglevel(loglevel)
    loaded = load_app(app)
    # It neither signs nor checks bearer tokens, but a wrong setting fails here, not later.
    refuse_insecure_signing(loaded, checks_tokens=False)
    require_current_schema(loaded, app)
    refuse_memory_broker(loaded, "worker")
    refuse_plaintext_personal_data(loaded, "worker")
    log_format = set_up_observability(loaded, "worker")
    use_celery_logging(log_format, level)
    # The pool processes are forked from this one: it must hold no database connection
    # they would share (each pool process also drops what it inherited, see CeleryJobs).
    loaded.database.dispose()
    if metrics_port is not None:
        from asanoha.cli.worker_metrics import start_worker_metrics

        start_worker_metrics(metrics_port, loaded.registry)
    argv = worker_argv(
        loaded.settings,
        concurrency=concurrency,
        lanes=chosen_lanes,
        loglevel=level,
        hostname=hostname,
        extra=extra,
    )
    if log_format == "json":
        # Celery prints its banner straight to the terminal, past any logging: not a line
        # a JSON reader could parse.
        argv.insert(0, "--quiet")
    run_celery(loaded.celery, argv)


def worker_argv(
    settings: Settings,
    *,
    concurrency: int,
    lanes: Sequence[Lane],
    loglevel: str,
    hostname: str | None,
    extra: Sequence[str],
) -> list[str]:
    """The ``celery worker`` arguments of ``asanoha worker``: the queues of ``lanes``. The
    platform's own queues (consumer wake-ups, cron ticks) every worker consumes beside them,
    on threads of its own (``workers/platform_threads``)."""
    from asanoha.workers.lanes import lane_queues

    name = hostname or f"{settings.queue_prefix}@%h-{os.getpid()}"
    return [
        "worker",
        f"--concurrency={concurrency}",
        f"--queues={','.join(lane_queues(settings, lanes))}",
        f"--hostname={name}",
        f"--loglevel={loglevel}",
        *extra,
    ]


def parse_lanes(values: Sequence[str]) -> tuple[Lane, ...]:
    """The lanes ``--lanes`` names, in order, once each; every lane when none is named."""
    # Imported here: ``asanoha --help`` imports this module (see ``asanoha.cli``).
    from asanoha.platform.model.handlers import Lane

    known: tuple[Lane, ...] = get_args(Lane)
    chosen: list[Lane] = []
    for value in values:
        for word in (part.strip() for part in value.split(",")):
            if not word:
                continue
            lane = next((lane for lane in known if lane == word), None)
            if lane is None:
                raise typer.BadParameter(
                    f"no lane {word!r}; the lanes are {', '.join(known)}", param_hint="--lanes"
                )
            if lane not in chosen:
                chosen.append(lane)
    return tuple(chosen) or known


def parse_loglevel(value: str) -> str:
    """``value`` upper-cased, when it is one of Celery's log levels."""
    level = value.upper()
    if level not in LOG_LEVELS:
        raise typer.BadParameter(
            f"{value!r} is not one of {', '.join(LOG_LEVELS[:-1])}", param_hint="--loglevel"
        )
    return level


def beat(
    app: AppOption,
    schedule: Annotated[
        Path, typer.Option(help="File where beat keeps the time of each entry's last run.")
    ] = Path("celerybeat-schedule"),
) -> None:
    """Run Celery beat: the cron jobs and the prune of finished job rows. Two may run side
    by side for availability: each cron tick is recorded once, by (job, scheduled time)
    (refuses a schema that is behind)."""
    loaded = load_app(app)
    # It neither signs nor checks bearer tokens, but a wrong setting fails here, not later.
    refuse_insecure_signing(loaded, checks_tokens=False)
    require_current_schema(loaded, app)
    refuse_memory_broker(loaded, "beat")
    log_format = set_up_observability(loaded, "beat")
    use_celery_logging(log_format, "INFO")
    # As for the worker: no banner printed past the JSON lines.
    quiet = ["--quiet"] if log_format == "json" else []
    run_celery(loaded.celery, [*quiet, "beat", f"--schedule={schedule}", "--loglevel=INFO"])


def use_celery_logging(log_format: LogFormat, level: str) -> None:
    """Have the Celery program run next log in ``log_format`` (see ``workers/log_hooks``)."""
    from asanoha.workers.log_hooks import use_platform_logging

    use_platform_logging(log_format, level)
