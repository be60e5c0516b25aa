"""End stamps of the worker benchmarks: each run of one task appends its end time (the
system-wide monotonic clock, comparable between processes) to one file. Both sides of a
comparison install the same hook, so it costs them alike: a write of a few bytes per task,
no round trip to any server. A benchmark whose clock starts at the first task of a kind
stamps their starts the same way, into a file of their own."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery import signals

#: The file the stamps go to; no stamps without it.
STAMPS_ENV = "BENCH_STAMPS"
#: The file start stamps go to; none without it.
STARTS_ENV = "BENCH_STARTS"


def stamp_task_ends(task_name: str) -> None:
    """In every worker process: stamp each run of ``task_name`` that ends (when the
    ``BENCH_STAMPS`` environment variable names a file)."""
    path = os.environ.get(STAMPS_ENV)
    if path:
        signals.task_postrun.connect(_Stamper(path, task_name), weak=False)


def stamp_task_starts(task_name: str) -> None:
    """In every worker process: stamp each run of ``task_name`` as it starts (when the
    ``BENCH_STARTS`` environment variable names a file)."""
    path = os.environ.get(STARTS_ENV)
    if path:
        signals.task_prerun.connect(_Stamper(path, task_name), weak=False)


def read_stamps(path: Path) -> list[float]:
    """The stamps written so far, in time order."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return sorted(float(line) for line in text.split())


class _Stamper:
    def __init__(self, path: str, task_name: str) -> None:
        self._path = path
        self._task_name = task_name
        self._fd = -1
        self._pid = 0

    def __call__(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) != self._task_name:
            return
        if self._pid != os.getpid():  # opened in each pool process, after the fork
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        # One short O_APPEND write: lines from several processes never interleave.
        os.write(self._fd, b"%.6f\n" % time.monotonic())
