"""``GET /metrics``: the Prometheus text format of this API process and the database gauges."""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from asanoha.platform.metrics import DatabaseCollector, scrape_registry


def add_metrics_route(api: FastAPI, collector: DatabaseCollector) -> None:
    """Register ``GET /metrics`` (unauthenticated, like ``/health``: keep it off the public
    ingress, it names handlers and consumers)."""

    async def metrics() -> Response:
        body = await run_in_threadpool(lambda: generate_latest(scrape_registry(collector)))
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    api.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False, name="metrics")
