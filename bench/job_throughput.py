"""Job throughput: asanoha jobs against bare Celery tasks, and drain latency, in one run.

Both sides run on the same broker with the same worker (the in-process thread-pool worker of
``JobRuntime``, late acks, prefetch 1, task events on). N messages are queued before the
worker starts; the rate is N over the time from the first task starting to the last one
finishing; the CPU time the process spent per message is printed too (steadier than rates
when other work shares the machine). The asanoha side runs every message through the job
wrapper: the claim of the attempt on its job row (one statement, which also returns the
payload), the context, the job in a fresh context under its time limit, and the end of the
attempt (one statement: the row's state and the run row). The sides alternate ``--repeat``
times and medians are reported.

Then, on the asanoha stack: drain latency (from the last job of a small batch finishing to
``drain()`` returning) and ``drain()`` on an idle stack, as medians.

    .venv/bin/python bench/job_throughput.py [--jobs 1000] [--broker redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import threading
import time
from typing import Any

from celery import signals

from asanoha.app import App
from asanoha.platform.model import Feature
from asanoha.platform.settings import Settings
from asanoha.testing.databases import TestDatabase
from asanoha.workers import JobRuntime, dispatch_job
from asanoha.workers.lanes import queue_name

BARE_TASK = "bench.bare-noop"
JOB = "bench:job:noop"

feature = Feature("bench")


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    return None


class Completions:
    """Start of the first task and end of the last one, from the worker's signals."""

    def __init__(self, task_name: str) -> None:
        self.task_name = task_name
        self.first_start: float | None = None
        self.last_end = 0.0
        self.done = 0
        self.target = 0
        self.reached = threading.Event()
        self._lock = threading.Lock()

    def expect(self, count: int) -> None:
        with self._lock:
            self.first_start = None
            self.done = 0
            self.target = count
            self.reached.clear()

    def connect(self) -> None:
        signals.task_prerun.connect(self.on_prerun, weak=False)
        signals.task_postrun.connect(self.on_postrun, weak=False)

    def disconnect(self) -> None:
        signals.task_prerun.disconnect(self.on_prerun)
        signals.task_postrun.disconnect(self.on_postrun)

    def on_prerun(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == self.task_name and self.first_start is None:
            self.first_start = time.perf_counter()

    def on_postrun(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) != self.task_name:
            return
        with self._lock:
            self.done += 1
            self.last_end = time.perf_counter()
            if self.done >= self.target:
                self.reached.set()


def _app(database_url: str, broker: str) -> App:
    """An application on the benchmark database with queues of its own."""
    settings = Settings(
        database_url=database_url,
        broker_url=broker,
        queue_prefix=f"asanoha-bench-{secrets.token_hex(4)}",
    )
    app = App([feature], settings)
    app.create_schema()
    return app


def run_bare(database_url: str, broker: str, jobs: int) -> dict[str, float]:
    """Tasks per second of a bare Celery task on the runtime's worker."""
    app = _app(database_url, broker)
    celery = app.celery

    @celery.task(name=BARE_TASK, shared=False, ignore_result=True)  # type: ignore[untyped-decorator]
    def bare(payload: dict[str, Any], meta: dict[str, Any] | None = None) -> None:
        return None

    queue = queue_name(app.settings.queue_prefix, "worker")
    for _ in range(jobs):
        celery.send_task(BARE_TASK, args=[{}], kwargs={"meta": {}}, queue=queue)
    completions = Completions(BARE_TASK)
    try:
        measured, runtime = _consume(app, completions, jobs)
        runtime.stop()
        return measured
    finally:
        completions.disconnect()
        app.close()


def run_asanoha(database_url: str, broker: str, jobs: int, rounds: int) -> dict[str, float]:
    """Jobs per second through the wrapper, then (``rounds`` > 0) the drain latencies."""
    app = _app(database_url, broker)
    for _ in range(jobs):
        dispatch_job(app, JOB, {})
    completions = Completions(JOB)
    try:
        measured, runtime = _consume(app, completions, jobs)
        try:
            runtime.drain()
            if rounds:
                measured |= _drain_latencies(runtime, completions, rounds)
        finally:
            runtime.stop()
    finally:
        completions.disconnect()
        app.close()
    return measured


def _drain_latencies(
    runtime: JobRuntime, completions: Completions, rounds: int
) -> dict[str, float]:
    """Medians: last job of a batch finished -> ``drain()`` returned; ``drain()`` when idle."""
    after_jobs = []
    for _ in range(rounds):
        completions.expect(5)
        for _ in range(5):
            runtime.dispatch(JOB, {})
        runtime.drain()
        after_jobs.append(time.perf_counter() - completions.last_end)
    idle = []
    for _ in range(rounds):
        started = time.perf_counter()
        runtime.drain()
        idle.append(time.perf_counter() - started)
    return {"drain_latency": statistics.median(after_jobs), "idle_drain": statistics.median(idle)}


def _consume(app: App, completions: Completions, jobs: int) -> tuple[dict[str, float], JobRuntime]:
    """Start the worker on the queued messages; rate and CPU per message once all finished."""
    completions.expect(jobs)
    completions.connect()
    cpu = time.process_time()
    runtime = JobRuntime.start(app)
    try:
        if not completions.reached.wait(timeout=max(60.0, jobs / 50)):
            raise RuntimeError(f"only {completions.done} of {jobs} messages were processed")
    except BaseException:
        runtime.stop()
        raise
    assert completions.first_start is not None
    rate = jobs / (completions.last_end - completions.first_start)
    return {"rate": rate, "cpu": (time.process_time() - cpu) / jobs}, runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="messages per side")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=20, help="drain measurements")
    parser.add_argument(
        "--repeat", type=int, default=3, help="alternating bare/asanoha runs (medians reported)"
    )
    args = parser.parse_args()

    database = TestDatabase.create("postgres", f"asanoha_bench_{secrets.token_hex(5)}")
    bare_runs: list[dict[str, float]] = []
    job_runs: list[dict[str, float]] = []
    try:
        for repeat in range(args.repeat):
            bare_runs.append(run_bare(database.url, args.broker, args.jobs))
            last = repeat == args.repeat - 1
            rounds = args.rounds if last else 0
            job_runs.append(run_asanoha(database.url, args.broker, args.jobs, rounds))
    finally:
        database.drop()
    measured = job_runs[-1]
    # Alternating runs and medians: other load on the machine hits both sides alike.
    bare = statistics.median(r["rate"] for r in bare_runs)
    rate = statistics.median(r["rate"] for r in job_runs)
    ratio = rate / bare
    print(f"broker {args.broker}, {args.jobs} messages per side, {args.repeat} runs each")
    print(f"bare Celery tasks    {bare:9.0f} /s   {_runs(bare_runs)}")
    print(f"asanoha jobs         {rate:9.0f} /s   {_runs(job_runs)}")
    print(f"ratio                {ratio:9.2f}   (target >= 0.8)")
    print(f"drain latency        {measured['drain_latency'] * 1000:9.1f} ms median (target <= 60)")
    print(f"drain on idle stack  {measured['idle_drain'] * 1000:9.1f} ms median (target <= 30)")


def _runs(runs: list[dict[str, float]]) -> str:
    rates = ", ".join(f"{r['rate']:.0f}" for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs) * 1000
    return f"(runs: {rates}; {cpu:.2f} ms CPU per message)"


if __name__ == "__main__":
    main()
