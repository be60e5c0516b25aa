"""How ``asanoha worker`` and ``asanoha beat`` log: every line of the process (Celery's own,
the jobs', what they print) in the platform's format (``platform/log_format.py``), the log
fields of a task cleared once it is done, and buffered spans exported before a pool
process exits."""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import signals
from celery.utils.log import LoggingProxy

from asanoha.platform import telemetry
from asanoha.platform.log_context import clear_log_fields
from asanoha.platform.log_format import LogFormat, configure_logging

#: The logger that takes what the process prints on stdout and stderr.
REDIRECTED_LOGGER = "celery.redirected"


def use_platform_logging(log_format: LogFormat, level: str = "INFO") -> None:
    """Have the Celery program this process runs next log in ``log_format``, from now on.

    ``text`` leaves Celery's own logging as it is. ``json`` takes Celery's ``setup_logging``
    hook (Celery then configures nothing itself): one JSON handler on the root logger, and
    stdout and stderr sent through it, so the banner and a job's ``print`` are lines too.
    """
    signals.task_prerun.connect(_clear_fields, weak=False, dispatch_uid="asanoha-log-fields")
    signals.task_postrun.connect(_clear_fields, weak=False, dispatch_uid="asanoha-log-fields-end")
    signals.worker_process_shutdown.connect(
        _flush_spans, weak=False, dispatch_uid="asanoha-flush-spans"
    )
    signals.worker_shutdown.connect(_flush_spans, weak=False, dispatch_uid="asanoha-flush-main")
    if log_format != "json":
        return
    # At once: Celery warns (running as root, say) before it sets up its logging.
    configure_logging("json", level)

    def setup_logging(loglevel: Any = None, **_: Any) -> None:
        configure_logging("json", loglevel or logging.INFO)
        # The handler keeps the real stderr it was given; what is printed goes to it as
        # log lines from now on.
        redirected = logging.getLogger(REDIRECTED_LOGGER)
        sys.stdout = LoggingProxy(redirected, logging.WARNING)
        sys.stderr = LoggingProxy(redirected, logging.WARNING)
        # Celery says "worker: Warm shutdown" on the original stdout, past sys.stdout.
        setattr(sys, "__stdout__", sys.stdout)  # noqa: B010

    signals.setup_logging.connect(setup_logging, weak=False, dispatch_uid="asanoha-json-logs")


def _clear_fields(**_: Any) -> None:
    # A pool thread or process runs task after task: no line of one names another's job.
    clear_log_fields()


def _flush_spans(**_: Any) -> None:
    telemetry.flush()
