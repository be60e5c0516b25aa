"""``JobRuntime``: an in-process worker on the real broker, for test stacks and benchmarks."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from celery.contrib.testing.worker import start_worker

from asanoha.platform.model import SessionUser
from asanoha.workers.dispatch import dispatch_job
from asanoha.workers.drain import Drainer, DrainSummary
from asanoha.workers.lanes import lane_queues
from asanoha.workers.outcomes import outcomes_of
from asanoha.workers.pending import close_probe

if TYPE_CHECKING:
    from asanoha.app import App

#: Worker threads: enough for a job and the jobs it triggers to run side by side.
CONCURRENCY = 3
#: Seconds ``stop()`` waits for running jobs to finish.
SHUTDOWN_TIMEOUT = 30.0


class JobRuntime:
    """A thread-pool Celery worker consuming the application's lane queues, plus ``drain``."""

    def __init__(self, app: App, resources: ExitStack, worker: Any) -> None:
        self.app = app
        self.worker = worker
        self._resources = resources
        self._drainer = Drainer(app)

    @classmethod
    def start(cls, app: App, *, concurrency: int = CONCURRENCY) -> JobRuntime:
        """Build ``app.celery`` and start its worker. The schema must exist already."""
        if not app.registry.jobs:
            features = ", ".join(f.name for f in app.registry.features) or "none"
            raise RuntimeError(
                f"the stack has jobs enabled but its features ({features}) define no job; "
                "declare one with @feature.job(...) or create the stack without jobs=True"
            )
        celery = app.celery
        # The test runner owns the root logger; the embedded worker must not replace it.
        celery.conf.worker_hijack_root_logger = False
        outcomes = outcomes_of(celery)
        resources = ExitStack()
        outcomes.connect()
        resources.callback(outcomes.disconnect)
        resources.callback(close_probe, celery)
        try:
            worker = resources.enter_context(
                start_worker(
                    celery,
                    pool="threads",
                    concurrency=concurrency,
                    perform_ping_check=False,
                    queues=list(lane_queues(app.settings)),
                    shutdown_timeout=SHUTDOWN_TIMEOUT,
                )
            )
            return cls(app, resources, worker)
        except BaseException:
            resources.close()
            raise

    def dispatch(
        self, job_qn: str, payload: dict[str, Any], user: SessionUser | None = None
    ) -> str:
        """Enqueue ``job_qn`` by hand; return its task id."""
        return dispatch_job(self.app, job_qn, payload, user)

    def drain(self, timeout: float = 10.0) -> DrainSummary:
        """Wait until every job has settled (see ``Drainer.drain``)."""
        return self._drainer.drain(timeout)

    def stop(self) -> None:
        """Stop the worker and release its broker connections."""
        self._resources.close()
