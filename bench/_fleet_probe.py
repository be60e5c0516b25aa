"""What the machine and Postgres did while a measurement ran: how busy the CPUs were, the CPU
seconds of named groups of processes, the Postgres server's CPU, its commits and the WAL it
wrote, and the load average. For ``bench/fleet.py`` and ``bench/consumer_catchup.py``.

The machines these run on are shared: the CPU share is of every process (ours or not), the
WAL position and the transaction ids are the whole server's; commits are the benchmark's
database only (``pg_stat_database``).

Commits are the commit records in the WAL between the window's two positions
(``pg_walinspect``): every commit of a transaction that wrote, on the whole server, counted
exactly. The database's ``xact_commit`` is printed beside it as "reported": a backend adds
its commits to it at most once a second, and an idle one up to 10 s later, so over a window
of a few seconds it falls short (``settle`` waits a second at both ends, which helps only
partly). Transaction ids count subtransactions that wrote too (a consumer's savepoint per
event), so they are no commit count.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from _common import conninfo

TICK = os.sysconf("SC_CLK_TCK")
#: Groups of process ids, by the name they are reported under.
Groups = Mapping[str, Sequence[int]]

_COUNTERS = """
SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
       pg_current_wal_flush_lsn()::text,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint
"""
# The commit records the server wrote between two positions (pg_walinspect, Postgres 15+).
_COMMIT_RECORDS = """
SELECT coalesce(sum(count), 0) FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true)
WHERE "resource_manager/record_type" IN ('Transaction/COMMIT', 'Transaction/COMMIT_PREPARED')
"""


@dataclass
class Window:
    """What happened between the start and the end of one measurement."""

    seconds: float = 0.0
    #: Share of all CPUs' time that was busy (every process on the machine).
    busy: float = 0.0
    cpus: int = os.cpu_count() or 1
    #: CPU seconds of each group of processes.
    cpu: dict[str, float] = field(default_factory=dict)
    #: CPU seconds of the Postgres server: the benchmark database's backends, and the
    #: server's own processes (WAL writer, checkpointer, WAL sender, a standby's replay).
    postgres_backends: float = 0.0
    postgres_server: float = 0.0
    #: Commit records in the WAL: the whole server's commits of writing transactions
    #: (``None``: the WAL was recycled before it could be read).
    commits: int | None = 0
    #: The benchmark database's ``xact_commit`` (as reported so far: see above).
    reported: int = 0
    wal_bytes: int = 0
    #: Transaction ids drawn on the whole server (subtransactions that wrote included).
    xids: int = 0
    load: float = 0.0

    @property
    def postgres(self) -> float:
        return self.postgres_backends + self.postgres_server

    @property
    def busy_seconds(self) -> float:
        """CPU seconds the machine spent busy, all CPUs together."""
        return self.busy * self.cpus * self.seconds

    @property
    def postgres_share(self) -> float:
        """Postgres's part of the busy CPU time."""
        return self.postgres / self.busy_seconds if self.busy_seconds else 0.0

    def commit_rate(self) -> str:
        return "?" if self.commits is None else f"{self.per_second(self.commits):,.0f}"

    def per_second(self, value: float) -> float:
        return value / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        """One line: CPU, Postgres, commits, WAL, load."""
        return (
            f"CPUs {self.busy:.0%} busy, Postgres {self.postgres_share:.0%} of it; "
            f"{self.commit_rate()} commits/s "
            f"({self.per_second(self.reported):,.0f} reported), "
            f"WAL {self.per_second(self.wal_bytes) / 1e6:.2f} MB/s; load {self.load:.1f}"
        )

    def cpu_ms_per(self, units: int) -> str:
        """CPU milliseconds per unit of work, by group and for Postgres."""
        if not units:
            return ""
        parts = [f"{name} {1000 * seconds / units:.2f}" for name, seconds in self.cpu.items()]
        parts.append(f"Postgres {1000 * self.postgres / units:.2f}")
        return ", ".join(parts)


#: Seconds to let every backend report its counts (``pg_stat_database`` takes a backend's
#: commits when it flushes its statistics: at most once a second, and within a second after
#: it goes idle).
SETTLE = 1.1


@dataclass(frozen=True)
class _Counters:
    reported: int
    lsn: str
    xid: int


@dataclass(frozen=True)
class _Usage:
    at: float
    ticks: tuple[int, int]
    cpu: dict[str, dict[int, float]]
    backends: dict[int, float]
    server: dict[int, float]


@contextmanager
def watching(url: str, groups: Callable[[], Groups], *, settle: bool = False) -> Iterator[Window]:
    """Measure the block: the returned ``Window`` is filled when it ends. ``groups`` is
    called at both ends (processes may start meanwhile: a new one counts whole). With
    ``settle``, the counters are read ``SETTLE`` seconds before the block and after it (the
    work must be idle then), so that the commits each backend had not yet reported count
    where they belong; the clock and the CPU are read at the block's edges."""
    window = Window()
    database = url.rsplit("/", 1)[1]
    if settle:
        time.sleep(SETTLE)
    with psycopg.connect(conninfo(url), autocommit=True) as holder:
        # A temporary slot keeps the window's WAL from being recycled by a checkpoint
        # before its commit records are counted; it goes with this connection.
        holder.execute(
            "SELECT pg_create_physical_replication_slot(%s, true, true)",
            (f"bench_window_{os.getpid()}_{time.monotonic_ns()}",),
        )
        counters_before = _counters(url)
        before = _usage(database, groups())
        yield window
        after = _usage(database, groups())
        if settle:
            time.sleep(SETTLE)
        counters_after = _counters(url)
        window.commits, window.wal_bytes = _wal_between(
            url, counters_before.lsn, counters_after.lsn
        )
    window.seconds = after.at - before.at
    window.busy = busy_share(before.ticks, after.ticks)
    window.cpu = {name: spent(before.cpu.get(name, {}), pids) for name, pids in after.cpu.items()}
    window.postgres_backends = spent(before.backends, after.backends)
    window.postgres_server = spent(before.server, after.server)
    window.reported = counters_after.reported - counters_before.reported
    window.xids = counters_after.xid - counters_before.xid
    window.load = os.getloadavg()[0]


def _counters(url: str) -> _Counters:
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        found = conn.execute(_COUNTERS).fetchone()
    reported, lsn, xid = found if found else (0, "0/0", 0)
    return _Counters(int(reported or 0), str(lsn), int(xid))


def _wal_between(url: str, start: str, end: str) -> tuple[int | None, int]:
    """Commit records (``None`` if a checkpoint has recycled the WAL they were in all the
    same) and WAL bytes between two WAL positions."""
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        size = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (end, start))
        found = size.fetchone()
        wal = int(found[0]) if found else 0
        try:
            found = conn.execute(_COMMIT_RECORDS, (start, end)).fetchone()
        except psycopg.errors.UndefinedFile:
            return None, wal
    return int(found[0]) if found else 0, wal


def _usage(database: str, groups: Groups) -> _Usage:
    backends, server = postgres_processes(database)
    return _Usage(
        at=time.perf_counter(),
        ticks=cpu_ticks(),
        cpu={name: cpu_seconds(pids) for name, pids in groups.items()},
        backends=cpu_seconds(backends),
        server=cpu_seconds(server),
    )


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (``/proc/stat``)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How busy the CPUs were between two readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


def cpu_seconds(pids: Sequence[int]) -> dict[int, float]:
    """User + system CPU seconds of each process in ``pids`` that is still there."""
    found: dict[int, float] = {}
    for pid in pids:
        try:
            values = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(values[11]) + int(values[12])) / TICK
    return found


def spent(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU seconds the processes of ``after`` spent since ``before``."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def postgres_processes(database: str) -> tuple[list[int], list[int]]:
    """The backends serving ``database``, and the server's own processes (those with no
    client, and WAL senders): by their process titles."""
    backends: list[int] = []
    server: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if not title.startswith("postgres:"):
            continue
        if f" {database} " in title:
            backends.append(int(entry.name))
        elif "(" not in title or "walsender" in title:
            server.append(int(entry.name))
    return backends, server


def backend_pids(url: str, application_name: str | None = None) -> list[int]:
    """The backends of ``url``'s database (of one application name, if given)."""
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    query += " AND pid <> pg_backend_pid()"
    params: tuple[str, ...] = ()
    if application_name is not None:
        query += " AND application_name = %s"
        params = (application_name,)
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        return [int(row[0]) for row in conn.execute(query, params).fetchall()]
