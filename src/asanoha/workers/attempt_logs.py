"""What a job logs through ``ctx.log``, kept with its attempt's run row.

The worker's own log rotates away; the run row is where an operator looks for a failed
attempt (``asanoha jobs runs --logs <id>``, ``job-admin:query:runs``). Records at INFO and
above are kept, bounded per attempt: the first ``MAX_LINES`` lines and ``MAX_BYTES`` of text,
NUL characters removed (a text column refuses them). Personal values the attempt revealed are
replaced by a marker, in the kept lines and in what goes on to the logger (see
``platform.personal.redaction``).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from asanoha.platform.personal import redaction

#: Lines kept per attempt; later ones are counted, not kept.
MAX_LINES = 200
#: Bytes of text (UTF-8) kept per attempt.
MAX_BYTES = 64 * 1024

_Record = tuple[str, str, tuple[str, str] | None]


class AttemptLog(logging.LoggerAdapter[logging.Logger]):
    """``ctx.log``: logs as a logger does, and keeps the lines at INFO and above."""

    def __init__(self, logger: logging.Logger, extra: MutableMapping[str, Any]) -> None:
        super().__init__(logger, extra)
        self._lock = threading.Lock()
        #: Level name, message and exception (type, message) of each kept record: redacted
        #: when read, once every value the attempt revealed is known.
        self._lines: list[_Record] = []
        self._bytes = 0
        self._dropped = 0

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log ``msg`` and keep its line when ``level`` is INFO or above."""
        if level >= logging.INFO:
            self._keep(level, msg, args, kwargs.get("exc_info"))
        revealed = redaction.current()
        if revealed and self.isEnabledFor(level):
            # Formatted here, so that the logger gets the message with its values replaced.
            msg, args = revealed.redact(_format(msg, args)), ()
        super().log(level, msg, *args, **kwargs)

    def _keep(self, level: int, msg: object, args: tuple[Any, ...], exc_info: Any) -> None:
        error = _exception_of(exc_info)
        described = None if error is None else (type(error).__name__, str(error))
        record = (logging.getLevelName(level), _format(msg, args), described)
        size = len(_line(record, _as_is).encode("utf-8", "replace")) + 1
        with self._lock:
            if len(self._lines) >= MAX_LINES or self._bytes + size > MAX_BYTES:
                self._dropped += 1
                return
            self._lines.append(record)
            self._bytes += size

    def kept(self) -> str | None:
        """The kept lines, one per record (``None``: nothing was logged), with the personal
        values revealed in the open scope replaced (its bounds hold before that)."""
        revealed = redaction.current()
        redact = revealed.redact if revealed else _as_is
        with self._lock:
            if not self._lines and not self._dropped:
                return None
            lines = [_line(record, redact) for record in self._lines]
            if self._dropped:
                lines.append(f"[{self._dropped} more line(s) not kept]")
            return "\n".join(lines)


def _format(msg: object, args: tuple[Any, ...]) -> str:
    try:
        return str(msg) % args if args else str(msg)
    except (TypeError, ValueError):
        return f"{msg} {args!r}"


def _line(record: _Record, redact: Callable[[str], str]) -> str:
    level, text, error = record
    line = f"{level} {redact(text)}"
    if error is not None:
        line = f"{line}: {error[0]}: {redact(error[1])}"
    return line.replace("\x00", "")


def _as_is(text: str) -> str:
    return text


def _exception_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    if exc_info:
        return sys.exc_info()[1]
    return None
