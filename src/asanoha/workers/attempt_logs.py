"""What a job logs through ``ctx.log``, kept with its attempt's run row.

The worker's own log rotates away; the run row is where an operator looks for a failed
attempt (``asanoha jobs runs --logs <id>``, ``job-admin:query:runs``). Records at INFO and
above are kept, bounded per attempt: the first ``MAX_LINES`` lines and ``MAX_BYTES`` of text,
NUL characters removed (a text column refuses them).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import MutableMapping
from typing import Any

#: Lines kept per attempt; later ones are counted, not kept.
MAX_LINES = 200
#: Bytes of text (UTF-8) kept per attempt.
MAX_BYTES = 64 * 1024


class AttemptLog(logging.LoggerAdapter[logging.Logger]):
    """``ctx.log``: logs as a logger does, and keeps the lines at INFO and above."""

    def __init__(self, logger: logging.Logger, extra: MutableMapping[str, Any]) -> None:
        super().__init__(logger, extra)
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._bytes = 0
        self._dropped = 0

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log ``msg`` and keep its line when ``level`` is INFO or above."""
        if level >= logging.INFO:
            self._keep(level, msg, args, kwargs.get("exc_info"))
        super().log(level, msg, *args, **kwargs)

    def _keep(self, level: int, msg: object, args: tuple[Any, ...], exc_info: Any) -> None:
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = f"{msg} {args!r}"
        error = _exception_of(exc_info)
        if error is not None:
            text = f"{text}: {type(error).__name__}: {error}"
        line = f"{logging.getLevelName(level)} {text}".replace("\x00", "")
        size = len(line.encode("utf-8", "replace")) + 1
        with self._lock:
            if len(self._lines) >= MAX_LINES or self._bytes + size > MAX_BYTES:
                self._dropped += 1
                return
            self._lines.append(line)
            self._bytes += size

    def kept(self) -> str | None:
        """The kept lines, one per record (``None``: nothing was logged)."""
        with self._lock:
            if not self._lines and not self._dropped:
                return None
            lines = list(self._lines)
            if self._dropped:
                lines.append(f"[{self._dropped} more line(s) not kept]")
            return "\n".join(lines)


def _exception_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    if exc_info:
        return sys.exc_info()[1]
    return None
