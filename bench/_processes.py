"""Processes the benchmarks start: run a command in the background, wait until it says it is
ready, read its memory (and its children's) from ``/proc``, and stop it however the run ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Memory:
    """Memory of one process tree, in MiB: resident (RSS) and proportional (PSS: each shared
    page divided among the processes that share it, so the sum does not count it twice)."""

    main_rss: float
    children_rss: float
    main_pss: float
    children_pss: float
    children: int
    #: Private (unshared) memory of the children: what each paid for itself after the fork.
    children_uss: float = 0.0

    @property
    def rss(self) -> float:
        return self.main_rss + self.children_rss

    @property
    def pss(self) -> float:
        return self.main_pss + self.children_pss


@dataclass
class Started:
    """A process the run started, with the file its output goes to."""

    process: subprocess.Popen[bytes]
    output: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        """Everything it printed so far."""
        return self.output.read_text(errors="replace")


@contextmanager
def started(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> Iterator[Started]:
    """Run ``command`` (output to a temporary file); terminate it, then kill it, at the end."""
    with tempfile.NamedTemporaryFile(prefix="asanoha-bench-", suffix=".log") as log:
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        try:
            yield Started(process, Path(log.name))
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM (a Celery worker's warm shutdown), then SIGKILL if it does not exit in time."""
    if process.poll() is not None:
        return
    children = descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for child in children:  # only what this process started: pool children left behind
        with suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def wait_for_output(started_: Started, marker: str, timeout: float = 60) -> None:
    """Wait until the process has printed ``marker``; raise if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker in started_.text():
            return
        if started_.process.poll() is not None:
            raise RuntimeError(f"exited with {started_.process.returncode}:\n{started_.text()}")
        time.sleep(0.1)
    raise RuntimeError(f"{marker!r} not printed within {timeout:.0f} s:\n{started_.text()}")


def wait_until(
    condition: Callable[[], bool], process: Started, what: str, timeout: float = 60
) -> None:
    """Wait until ``condition()`` holds; raise, naming ``what``, if the process exits first
    or the timeout passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process.process.poll() is not None:
            raise RuntimeError(f"{what}: the process exited:\n{process.text()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done within {timeout:.0f} s:\n{process.text()}")
        time.sleep(0.1)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in parents.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and of every process below it."""
    total = 0
    for one in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def _kib(pid: int, path: str, key: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(key + ":"):
                return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def memory_of(pid: int) -> Memory:
    """RSS and PSS of ``pid`` and of every process below it (Linux ``/proc``)."""
    children = descendants(pid)

    def total(pids: Sequence[int], path: str, key: str) -> float:
        return sum(_kib(p, path, key) for p in pids) / 1024

    return Memory(
        main_rss=total([pid], "status", "VmRSS"),
        children_rss=total(children, "status", "VmRSS"),
        main_pss=total([pid], "smaps_rollup", "Pss"),
        children_pss=total(children, "smaps_rollup", "Pss"),
        children=len(children),
        children_uss=total(children, "smaps_rollup", "Private_Clean")
        + total(children, "smaps_rollup", "Private_Dirty"),
    )
