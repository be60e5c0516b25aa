"""How a process writes its log lines: ``ASANOHA_LOG_FORMAT=json`` (one JSON object per
line, python-json-logger) or ``text``; unset, ``text`` on a terminal and ``json`` otherwise.

``configure_logging`` puts one handler on the root logger; every other logger of the
process (uvicorn's access and error logs, Celery's worker logs, warnings) is sent there,
so every line has the same shape. A JSON line carries the fields ``log_context`` binds and
the current trace and span ids. ``logging_config`` is the same setup as a ``dictConfig``
for uvicorn, whose worker and reload processes configure their logging themselves.
"""

from __future__ import annotations

import logging
import logging.config
import os
import sys
from typing import IO, Any, Literal

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from asanoha.platform import telemetry
from asanoha.platform.log_context import log_fields

LogFormat = Literal["text", "json"]
#: The variable that chooses the format.
LOG_FORMAT_VARIABLE = "ASANOHA_LOG_FORMAT"
#: The text lines, as ``celery worker`` prints its own.
TEXT_FORMAT = "[%(asctime)s: %(levelname)s/%(name)s] %(message)s"
#: Loggers that keep handlers of their own unless told otherwise: sent to the root's.
OWN_HANDLER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "py.warnings")


def resolve_log_format(value: str | None = None, stream: IO[str] | None = None) -> LogFormat:
    """The format ``value`` (else ``$ASANOHA_LOG_FORMAT``) names; unset or ``auto``:
    ``text`` when ``stream`` (stderr) is a terminal, else ``json``."""
    chosen = (value if value is not None else os.environ.get(LOG_FORMAT_VARIABLE, "")).strip()
    chosen = chosen.lower()
    if chosen in ("text", "json"):
        return "text" if chosen == "text" else "json"
    if chosen not in ("", "auto"):
        raise ValueError(f"{LOG_FORMAT_VARIABLE}={chosen!r}: use text, json or auto")
    target = stream if stream is not None else sys.stderr
    return "text" if _is_terminal(target) else "json"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class AsanohaJsonFormatter(JsonFormatter):
    """One JSON object per record: time, level, logger, message, the bound ``log_context``
    fields, ``trace_id`` and ``span_id`` when a span is current, and any ``extra=``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timestamp", True)
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        # uvicorn's copy of the message with terminal colour codes.
        kwargs.setdefault("reserved_attrs", [*RESERVED_ATTRS, "color_message"])
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for name, value in log_fields().items():
            log_data.setdefault(name, value)
        ids = telemetry.current_ids()
        if ids is not None:
            log_data.setdefault("trace_id", ids[0])
            log_data.setdefault("span_id", ids[1])


def logging_config(log_format: LogFormat, level: str | int = "INFO") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dictionary: one stderr handler on the root logger in
    ``log_format``, every logger that has handlers of its own sent to it instead."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.AsanohaJsonFormatter"}
        if log_format == "json"
        else {"format": TEXT_FORMAT}
    )
    level_name = logging.getLevelName(level) if isinstance(level, int) else level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"asanoha": formatter},
        "handlers": {
            "asanoha": {
                "class": "logging.StreamHandler",
                "formatter": "asanoha",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {name: {"handlers": [], "propagate": True} for name in OWN_HANDLER_LOGGERS},
        "root": {"handlers": ["asanoha"], "level": level_name},
    }


#: The format ``configure_logging`` set up in this process, else ``None``.
_configured: LogFormat | None = None


def configure_logging(log_format: LogFormat, level: str | int = "INFO") -> None:
    """Write every log line of this process to stderr in ``log_format`` (see module doc)."""
    global _configured
    logging.config.dictConfig(logging_config(log_format, level))
    logging.captureWarnings(True)
    _configured = log_format


def configured_log_format() -> LogFormat | None:
    """The format this process logs in, when ``configure_logging`` set one up."""
    return _configured
