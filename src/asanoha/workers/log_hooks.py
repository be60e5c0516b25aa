"""How ``asanoha worker`` and ``asanoha beat`` log: every line of the process (Celery's own,
the jobs', what they print) in the platform's format (``platform/log_format.py``), the log
fields of a task cleared once it is done, the personal values a task revealed kept out of
Celery's lines about it, and buffered spans exported before a pool process exits."""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import signals
from celery.utils.log import LoggingProxy

from asanoha.platform import telemetry
from asanoha.platform.log_context import clear_log_fields
from asanoha.platform.log_format import LogFormat, configure_logging
from asanoha.platform.personal import redaction

#: The logger that takes what the process prints on stdout and stderr.
REDIRECTED_LOGGER = "celery.redirected"
#: Celery's logger of a task's outcome: its "retry" and "raised unexpected" lines carry the
#: task's error text, and the latter its traceback.
TASK_TRACE_LOGGER = "celery.app.trace"


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


class PersonalValuesFilter(logging.Filter):
    """Replaces, in a line logged while a task runs, the personal values the task revealed by
    ``redaction.MARKER``: in its message, its traceback and the ``data`` Celery attaches to
    it (which the JSON format writes out). The redaction is the one the job's stored runs
    get (``personal.redaction``), so a value reads the same in both."""

    _tracebacks = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        revealed = redaction.current()
        if not revealed:
            return True
        record.msg, record.args = revealed.redact(record.getMessage()), None
        if record.exc_info:
            # Formatted now, while the task's scope is open: a handler formats it later.
            traceback = self._tracebacks.formatException(record.exc_info)
            record.exc_info, record.exc_text = None, revealed.redact(traceback)
        elif record.exc_text:
            record.exc_text = revealed.redact(record.exc_text)
        data = getattr(record, "data", None)
        if isinstance(data, dict):
            record.data = redaction.redact_json(data)
        return True


_PERSONAL_VALUES_FILTER = PersonalValuesFilter()


def keep_personal_values_out_of_task_lines() -> None:
    """Keep the personal values a task revealed out of Celery's lines about it.

    A job attempt records what it revealed in a redaction scope (``personal.redaction``);
    Celery logs the attempt's retry or failure after the task function returned, when the
    attempt's own scope has closed. So each task runs inside a scope of its own, from
    ``task_prerun`` to ``task_postrun`` (the attempt's scope records into it), and a filter
    on Celery's tracer redacts its lines within it. Installed once per process; a pool
    process inherits it.
    """
    signals.task_prerun.connect(
        _open_task_scope, weak=False, dispatch_uid="asanoha-redaction-scope"
    )
    signals.task_postrun.connect(
        _close_task_scope, weak=False, dispatch_uid="asanoha-redaction-scope-end"
    )
    logging.getLogger(TASK_TRACE_LOGGER).addFilter(_PERSONAL_VALUES_FILTER)


def _open_task_scope(**_: Any) -> None:
    # Signals of one task run in the thread that runs it: the scope is that task's alone.
    redaction.enter(redaction.Revealed())


def _close_task_scope(**_: Any) -> None:
    redaction.enter(None)
