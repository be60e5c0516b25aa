"""The Writes page's numbers: the ``asanoha_writes`` counter as ``/metrics`` shows it (this
API process, or every process sharing ``PROMETHEUS_MULTIPROC_DIR``), by handler and outcome,
and the denied and rejected ones by reason.

The counter has no tenant label: it counts every tenant's writes, so the page shows it to the
operator tenant only (``ASANOHA_OPERATOR_TENANT``), as cursors are shown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from asanoha.platform.metrics import scrape_registry

OUTCOMES = ("ok", "denied", "rejected", "failed")


@dataclass(frozen=True)
class HandlerWrites:
    """The writes of one handler by outcome."""

    handler: str
    outcomes: dict[str, int]

    @property
    def total(self) -> int:
        """Every write of the handler."""
        return sum(self.outcomes.values())


@dataclass(frozen=True)
class Refusals:
    """How many writes were refused for one reason."""

    outcome: str
    reason: str
    count: int


@dataclass(frozen=True)
class WriteCounts:
    """The writes per handler and outcome, and the refusals by reason."""

    handlers: list[HandlerWrites]
    refusals: list[Refusals]


def write_counts() -> WriteCounts:
    """Read the write counter of this process (or of the processes sharing its metrics)."""
    by_handler: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(OUTCOMES, 0))
    by_reason: dict[tuple[str, str], int] = defaultdict(int)
    for metric in scrape_registry(None).collect():
        if metric.name != "asanoha_writes":
            continue
        for sample in metric.samples:
            if not sample.name.endswith("_total"):
                continue
            count = int(sample.value)
            handler, outcome = sample.labels["handler"], sample.labels["outcome"]
            by_handler[handler][outcome] = by_handler[handler].get(outcome, 0) + count
            if outcome in ("denied", "rejected") and count:
                by_reason[(outcome, sample.labels.get("reason", ""))] += count
    return WriteCounts(
        [
            HandlerWrites(handler, dict(outcomes))
            for handler, outcomes in sorted(by_handler.items())
        ],
        [
            Refusals(outcome, reason, count)
            for (outcome, reason), count in sorted(by_reason.items(), key=lambda item: -item[1])
        ],
    )
