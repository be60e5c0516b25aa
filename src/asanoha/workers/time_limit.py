"""A job's ``timeout`` where Celery cannot enforce it: in a thread-pool worker (test stacks,
the embedded worker).

Celery's prefork pool raises ``SoftTimeLimitExceeded`` in the job and kills the process at
the hard limit; the thread pool ignores time limits. There the body runs on a thread of a
pool of its own: at the timeout the attempt ends as failed with ``JobTimeLimitExceeded``,
and the body's thread gets the same exception raised into it at its next Python
instruction. The pool's threads are reused (starting a thread per job cost more than the
claim and the end of the attempt together).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

#: Body threads at most; a body past its timeout keeps its thread until it notices.
MAX_BODY_THREADS = 64

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


class JobTimeLimitExceeded(Exception):
    """The attempt ran longer than its job's ``timeout``."""


def call_with_time_limit(func: Callable[[], Any], timeout: float) -> Any:
    """Run ``func`` and return what it returns; raise ``JobTimeLimitExceeded`` once it has
    run ``timeout`` seconds."""
    body = _Body(func)
    future = _body_pool().submit(body.run)
    try:
        return future.result(timeout)
    except FutureTimeout:
        body.stop()
        raise JobTimeLimitExceeded(
            f"the attempt ran longer than its timeout of {timeout:g} s"
        ) from None


class _Body:
    """One job body on a pool thread, and the one moment it may be interrupted: while it
    runs. The exception is raised into the thread only under the lock, and never after the
    body has ended, so it cannot land in the next job the thread runs."""

    def __init__(self, func: Callable[[], Any]) -> None:
        self._func = func
        self._lock = threading.Lock()
        self._state = "waiting"
        self._thread_id = 0

    def run(self) -> Any:
        with self._lock:
            if self._state == "stopped":
                return None  # its caller gave up before a thread was free
            self._state = "running"
            self._thread_id = threading.get_ident()
        try:
            return self._func()
        finally:
            self._end()

    def stop(self) -> None:
        with self._lock:
            if self._state == "running":
                _raise_in(self._thread_id, JobTimeLimitExceeded)
            self._state = "stopped"

    def _end(self) -> None:
        # An exception raised into the thread just after the body returned arrives here.
        while True:
            try:
                with self._lock:
                    self._state = "ended"
                    _raise_in(self._thread_id, None)  # drop one still pending
                return
            except JobTimeLimitExceeded:
                continue


def _body_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(MAX_BODY_THREADS, thread_name_prefix="asanoha-job-body")
        return _pool


def _raise_in(thread_id: int, exc_type: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )
