"""Prometheus metrics: writes and job attempts counted where they happen, consumer lag and
outbox age read from the database when scraped.

``prometheus_client`` is imported on first use, not with this module: it picks in-memory or
multiprocess values (``PROMETHEUS_MULTIPROC_DIR``) when imported, and ``asanoha worker`` sets
that directory before its pool forks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from asanoha.platform.errors import AsanohaError, Reasons
from asanoha.platform.store import Database, Tables

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.core import Metric

WriteOutcome = Literal["ok", "denied", "rejected", "failed"]
JobOutcome = Literal["succeeded", "retried", "failed"]
#: The handler label of calls to names that are no handler: callers choose those names, and
#: one label value per name would let them grow the metric without bound.
UNKNOWN_HANDLER = "(unknown)"


@dataclass(frozen=True)
class PlatformMetrics:
    """The counters and histograms of one process."""

    writes: Counter
    job_attempts: Counter
    job_seconds: Histogram
    after_commit_failures: Counter
    replica_reads: Counter


_lock = threading.Lock()
_metrics: PlatformMetrics | None = None


def platform_metrics() -> PlatformMetrics:
    """The process's metrics, registered in the default registry on first use."""
    global _metrics
    if _metrics is None:
        # Several request threads can make the first write at once; registering a metric
        # name twice raises, so only one of them may build the set.
        with _lock:
            if _metrics is None:
                _metrics = _build_metrics()
    return _metrics


def _build_metrics() -> PlatformMetrics:
    from prometheus_client import Counter, Histogram

    return PlatformMetrics(
        writes=Counter(
            "asanoha_writes",
            "Top-level writes by handler and outcome; denied and rejected ones by reason.",
            ["handler", "outcome", "reason"],
        ),
        job_attempts=Counter(
            "asanoha_job_attempts", "Job attempts by job and outcome.", ["job", "outcome"]
        ),
        job_seconds=Histogram(
            "asanoha_job_attempt_seconds",
            "Duration of job attempts.",
            ["job", "outcome"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        ),
        after_commit_failures=Counter(
            "asanoha_after_commit_hook_failures",
            "After-commit hooks that raised, by entity.",
            ["entity"],
        ),
        replica_reads=Counter(
            "asanoha_replica_reads",
            "Queries declared replica=True by the database that served them; those the "
            "primary served by why the replica did not (unavailable, lagging, behind_caller, "
            "not_standby).",
            ["served_by", "reason"],
        ),
    )


#: The write counter's child of each label set seen: ``labels()`` validates the labels and
#: takes a lock on every call, which a write need not pay again for the same handler.
_write_counters: dict[tuple[str, str, str], Counter] = {}


def count_write(handler: str, outcome: WriteOutcome, reason: str = "") -> None:
    """Count one top-level write (one counter increment)."""
    key = (handler, outcome, reason)
    counter = _write_counters.get(key)
    if counter is None:
        counter = _write_counters[key] = platform_metrics().writes.labels(*key)
    counter.inc()


def write_outcome(http_status: int) -> WriteOutcome:
    """The outcome of a write that raised an error of ``http_status``."""
    if http_status in (401, 403):
        return "denied"
    if http_status < 500:
        return "rejected"
    return "failed"


def count_after_commit_failure(entity: str) -> None:
    """Count one after-commit hook of ``entity`` that raised."""
    platform_metrics().after_commit_failures.labels(entity).inc()


def count_replica_read(bypass: str | None) -> None:
    """Count one query that could read the replica: served by it (``bypass`` ``None``) or by
    the primary, and why."""
    served_by = "primary" if bypass else "replica"
    platform_metrics().replica_reads.labels(served_by, bypass or "").inc()


def observe_job_attempt(job: str, outcome: JobOutcome, seconds: float) -> None:
    """Count one job attempt and its duration."""
    metrics = platform_metrics()
    metrics.job_attempts.labels(job, outcome).inc()
    metrics.job_seconds.labels(job, outcome).observe(seconds)


#: ``(consumer, lag, status)`` of every consumer; the lag counts committed events of its types.
ConsumerLags = Callable[[], Iterable[tuple[str, int, str]]]


class DatabaseCollector:
    """Gauges read from the database at scrape time: outbox age and consumer lag."""

    def __init__(
        self,
        database: Database,
        tables: Tables,
        consumer_lags: ConsumerLags | None = None,
        *,
        unclaimed_after: float = 300.0,
    ) -> None:
        self.database = database
        self.tables = tables
        self.consumer_lags = consumer_lags
        #: Seconds a published job waits unclaimed before ``asanoha_outbox_unclaimed_rows``
        #: counts it (``ASANOHA_UNCLAIMED_ALERT_SECONDS``).
        self.unclaimed_after = unclaimed_after

    def collect(self) -> Iterator[Metric]:
        """Query the outbox and the consumer positions (short reads)."""
        from prometheus_client.core import GaugeMetricFamily

        # Imported here: the service layer imports this module (it counts writes).
        from asanoha.platform.service.outbox import count_unclaimed, due_backlog

        with self.database.connect() as conn:
            # The queries /health/jobs reads too, so the gauges and that check agree.
            backlog = due_backlog(conn, self.tables)
            unclaimed = count_unclaimed(conn, self.tables, self.unclaimed_after)
        yield GaugeMetricFamily(
            "asanoha_outbox_due_age_seconds",
            "Seconds the oldest due job row nobody published has waited (0 when none).",
            value=backlog.oldest_age,
        )
        yield GaugeMetricFamily(
            "asanoha_outbox_due_rows",
            "Due job rows nobody published (the relay's backlog).",
            value=backlog.rows,
        )
        yield GaugeMetricFamily(
            "asanoha_outbox_unclaimed_rows",
            "Published job rows no worker claimed within ASANOHA_UNCLAIMED_ALERT_SECONDS of "
            "their start time: messages the broker lost, or a backlog that far behind.",
            value=unclaimed,
        )
        lag = GaugeMetricFamily(
            "asanoha_consumer_lag_events",
            "Committed events of the consumer's types it has not handled yet.",
            labels=["consumer", "status"],
        )
        for name, behind, status in self.consumer_lags() if self.consumer_lags else ():
            lag.add_metric([name, status], behind)
        yield lag


def scrape_registry(database_collector: DatabaseCollector | None) -> CollectorRegistry:
    """What ``/metrics`` shows: this process (or, with ``PROMETHEUS_MULTIPROC_DIR``, every
    process that shares the directory), plus the database gauges."""
    import os

    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess

    platform_metrics()  # registered before the first scrape, so zero series show up
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Forward(REGISTRY))
    if database_collector is not None:
        registry.register(database_collector)
    return registry


class _Forward:
    # A collector that yields another registry's metrics, so the database gauges can be added
    # to a per-scrape registry without registering them in the process-wide one.
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


@contextmanager
def counted_write(handler: str) -> Iterator[None]:
    """Count the write the block runs: ``ok``, or the outcome and reason of what it raised."""
    try:
        yield
    except AsanohaError as error:
        count_failed_write(handler, error)
        raise
    except Exception:
        count_write(handler, "failed", "internal")
        raise
    count_write(handler, "ok")


def count_failed_write(handler: str, error: AsanohaError) -> None:
    """Count a write that raised ``error``."""
    if error.reason == Reasons.HANDLER_NOT_FOUND:
        handler = UNKNOWN_HANDLER
    count_write(handler, write_outcome(error.http_status), str(error.reason))
