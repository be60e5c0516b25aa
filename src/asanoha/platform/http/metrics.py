"""``GET /metrics``: the Prometheus text format of this API process, the database gauges and
the answers of the job pipeline's checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from asanoha.platform.http.health import HealthCheck, run_check
from asanoha.platform.metrics import DatabaseCollector, scrape_registry

if TYPE_CHECKING:
    from prometheus_client.core import Metric


class JobHealthCollector:
    """``asanoha_job_health_ok{check}``: 1 when a check of ``/health/jobs`` passes, else 0."""

    def __init__(self, checks: Callable[[], Mapping[str, HealthCheck]]) -> None:
        self.checks = checks

    def collect(self) -> Iterator[Metric]:
        """Run every check (the broker check waits at most a few seconds)."""
        from prometheus_client.core import GaugeMetricFamily

        gauge = GaugeMetricFamily(
            "asanoha_job_health_ok",
            "1 when the check of /health/jobs passes (broker reachable, due jobs published, "
            "published jobs claimed).",
            labels=["check"],
        )
        for name, check in self.checks().items():
            gauge.add_metric([name], 1.0 if run_check("jobs", name, check) == "ok" else 0.0)
        yield gauge


def add_metrics_route(
    api: FastAPI, collector: DatabaseCollector, job_health: JobHealthCollector | None = None
) -> None:
    """Register ``GET /metrics`` (unauthenticated, like ``/health``: keep it off the public
    ingress, it names handlers and consumers)."""

    def scrape() -> bytes:
        registry = scrape_registry(collector)
        if job_health is not None:
            registry.register(job_health)
        return generate_latest(registry)

    async def metrics() -> Response:
        body = await run_in_threadpool(scrape)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    api.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False, name="metrics")
