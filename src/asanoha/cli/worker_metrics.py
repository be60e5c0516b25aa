"""The worker's Prometheus exporter: job metrics of every pool process on one port."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from asanoha.platform.model import Registry

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def start_worker_metrics(port: int, registry: Registry) -> None:
    """Serve ``/metrics`` on ``port`` from this process, summing what its pool processes count.

    Uses prometheus_client's multiprocess mode: each process writes its values to files in
    ``PROMETHEUS_MULTIPROC_DIR`` (a fresh temporary folder unless set; give every worker its
    own), and the exporter adds them up when scraped.
    """
    if MULTIPROC_ENV not in os.environ:
        # Must be set before prometheus_client is first imported: it picks its value store then.
        folder = tempfile.mkdtemp(prefix="asanoha-worker-metrics-")
        os.environ[MULTIPROC_ENV] = folder
        atexit.register(_remove_folder, folder, os.getpid())
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    from asanoha.workers.job_metrics import count_job_attempts

    count_job_attempts({job.qn for job in registry.jobs})
    collected = CollectorRegistry()
    multiprocess.MultiProcessCollector(collected)  # type: ignore[no-untyped-call]
    start_http_server(port, registry=collected)


def _remove_folder(folder: str, owner_pid: int) -> None:
    # Pool processes inherit the exit handler; only the process that made the folder removes it.
    if os.getpid() == owner_pid:
        shutil.rmtree(folder, ignore_errors=True)
