"""``JobRuntime``: an in-process worker on the real broker, for test stacks and benchmarks."""

from __future__ import annotations

import datetime as dt
import threading
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from celery import _state as celery_state
from celery.contrib.testing.worker import start_worker
from celery.worker import state as worker_state

from asanoha.platform.model import SessionUser
from asanoha.workers.dispatch import dispatch_job
from asanoha.workers.drain import Drainer, DrainSummary
from asanoha.workers.lanes import app_queues, delete_queues, lane_queues

if TYPE_CHECKING:
    from asanoha.app import App

#: Worker threads: enough for a job and the jobs it triggers to run side by side.
CONCURRENCY = 3
#: Seconds a Redis consumer blocks per pop (its ``polling_interval``; the default is 1).
BRPOP_TIMEOUT = 0.1
#: Seconds ``stop()`` waits for running jobs to finish.
SHUTDOWN_TIMEOUT = 30.0


class JobRuntime:
    """A thread-pool Celery worker consuming the application's lane queues, plus ``drain``.

    Meant for test stacks and benchmarks, whose queue names are their own: ``stop()`` deletes
    the queues.
    """

    def __init__(self, app: App, resources: ExitStack, worker: Any) -> None:
        self.app = app
        self.worker = worker
        self._resources = resources
        self._drainer = Drainer(app)

    @classmethod
    def start(cls, app: App, *, concurrency: int = CONCURRENCY, relay: bool = False) -> JobRuntime:
        """Build ``app.celery`` and start its worker. The schema must exist already."""
        if not app.registry.jobs and not app.consumers:
            features = ", ".join(f.name for f in app.registry.features) or "none"
            raise RuntimeError(
                f"the stack has jobs enabled but its features ({features}) define no job "
                "or consumer; declare one with @feature.job(...) or create the stack without "
                "jobs=True"
            )
        with _ACTIVE_LOCK:
            if _active:
                raise RuntimeError(
                    "another stack with jobs=True is running in this process; Celery's embedded "
                    "worker keeps process-wide state (event loop, shutdown flag), so only one "
                    "can run at a time: put the features into one stack, or close the other first"
                )
            _active.add(app)
        try:
            return cls._start(app, concurrency, relay)
        except BaseException:
            with _ACTIVE_LOCK:
                _active.discard(app)
            raise

    @classmethod
    def _start(cls, app: App, concurrency: int, relay: bool) -> JobRuntime:
        jobs = app.celery_jobs
        celery = jobs.celery
        # The thread pool ignores Celery's time limits: enforce ``timeout=`` in the runner.
        jobs.runner.thread_time_limits = True
        # A test stack's drain() relays on every pass, and a relay thread besides it would
        # publish rows a test is looking at; a runtime that serves (asanoha serve on the
        # embedded broker) asks for the worker's relay.
        jobs.relay_in_worker = relay
        # The test runner owns the root logger; the embedded worker must not replace it.
        celery.conf.worker_hijack_root_logger = False
        # Nothing sends it commands, and its control bindings would outlive the stack.
        celery.conf.worker_enable_remote_control = False
        if app.settings.broker_url.startswith(("redis://", "rediss://")):
            # Closing a Redis consumer waits for its blocking pop to time out; keep that
            # short so a stack stops quickly.
            celery.conf.broker_transport_options = {
                **celery.conf.broker_transport_options,
                "polling_interval": BRPOP_TIMEOUT,
            }
        outcomes = jobs.outcomes
        queues = app_queues(app.settings)
        resources = ExitStack()
        resources.callback(_release, app)
        # The embedded worker makes its app Celery's current and default one; a closed
        # stack gives those back.
        resources.callback(_restore_current_app, *_current_apps())
        # Runs last: the queues are the stack's own (its prefix is unique), so they go away
        # with it instead of piling up on the shared broker.
        resources.callback(delete_queues, celery, queues)
        outcomes.connect()
        resources.callback(outcomes.disconnect)
        resources.callback(jobs.close)
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
            resources.callback(_wake_for_shutdown, worker)
            if relay:
                # Celery's test worker never sends worker_ready, which starts the relay of
                # an ``asanoha worker``: start it here.
                jobs.relay.start()
                resources.callback(jobs.relay.stop)
            # Nor the boot jobs, which a worker enqueues when it is ready.
            jobs.enqueue_boot_jobs()
            runtime = cls(app, resources, worker)
            resources.callback(runtime._drainer.close)
            return runtime
        except BaseException:
            resources.close()
            raise

    def dispatch(
        self,
        job_qn: str,
        payload: dict[str, Any],
        user: SessionUser | None = None,
        *,
        delay: float | None = None,
        at: dt.datetime | None = None,
        priority: int | None = None,
    ) -> str:
        """Enqueue ``job_qn`` by hand; return its task id."""
        return dispatch_job(self.app, job_qn, payload, user, delay=delay, at=at, priority=priority)

    def drain(self, timeout: float = 10.0) -> DrainSummary:
        """Wait until every job has settled (see ``Drainer.drain``)."""
        return self._drainer.drain(timeout)

    def forget_runs(self) -> None:
        """Forget the job runs seen so far (after the tables were emptied)."""
        self._drainer.forget()

    def stop(self) -> None:
        """Stop the worker, release its broker connections and delete its queues."""
        self._resources.close()


_ACTIVE_LOCK = threading.Lock()
#: The application whose runtime is running in this process (at most one).
_active: set[App] = set()


def _release(app: App) -> None:
    with _ACTIVE_LOCK:
        _active.discard(app)


def _wake_for_shutdown(worker: Any) -> None:
    """Ask the worker to stop and wake its event loop, which otherwise notices only when its
    poll times out (up to 10 s on RabbitMQ)."""
    worker_state.should_terminate = 0
    hub = getattr(worker, "hub", None)
    if hub is not None:
        hub.call_soon(lambda: None)


def _current_apps() -> tuple[Any, Any]:
    return celery_state._tls.current_app, celery_state.default_app


def _restore_current_app(current: Any, default: Any) -> None:
    celery_state._set_current_app(current)
    celery_state.set_default_app(default)
