"""What a command tells the person running it (a key it made, where its jobs run, a
development token): a log record of the ``asanoha.cli`` logger, so it has the shape of the
process's other lines.

Once ``configure_logging`` set a format up (``serve`` under ``ASANOHA_LOG_FORMAT=json``,
``worker``) the root logger's handler writes it: a JSON reader of the output parses every
line. Before that, or when nothing set one up, the message is printed alone on stderr, as
it reads on a terminal.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

log = logging.getLogger("asanoha.cli")


class _StderrHandler(logging.StreamHandler[TextIO]):
    """The message alone, on whatever ``sys.stderr`` is when it is written (a test's
    runner replaces it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_plain = _StderrHandler()
# Notices are for the person running the command: shown whatever level other lines have.
log.setLevel(logging.INFO)


def notify(message: str, level: int = logging.INFO) -> None:
    """Tell the person running the command ``message`` (see the module's doc)."""
    # Imported here: a command module imports this one, and ``asanoha --help`` imports every
    # command module (see ``asanoha.cli``).
    from asanoha.platform.log_format import configured_log_format

    # Decided per message: logging may be set up between two of them.
    plain = configured_log_format() is None
    if plain and _plain not in log.handlers:
        log.addHandler(_plain)
    elif not plain and _plain in log.handlers:
        log.removeHandler(_plain)
    log.propagate = not plain
    log.log(level, message)
