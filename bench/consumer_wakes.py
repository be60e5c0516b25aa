"""Consumer wake-ups per write burst: how many wake-up tasks 1,000 writes to a consumer with
4 partitions publish, against the partition count.

    .venv/bin/python bench/consumer_wakes.py [--writes 1000] [--partitions 4] [--json PATH]

An application with one event, a write that appends it (over 50 streams) and a consumer of
it with ``--partitions`` partitions runs on a fresh Postgres database with an in-process
worker (threads) on Redis; the workers' tick is off, so the wake-up tasks alone deliver. The
writes run back to back from one thread; the run ends when every event was delivered. It
prints the wake-up tasks published per 1,000 writes, that figure per partition (the peer: a
partition needs at least one), and the most wake-up tasks waiting in the queue at once,
which the design bounds by the partition count. The target: at most 10 per partition.
"""

from __future__ import annotations

import argparse
import secrets
import threading
import time
import uuid
from typing import Any

from pydantic import BaseModel

from _common import ADMIN_URL, describe_setup, scratch_database
from _results import Figure, at_most, safe_ratio, write_figures
from asanoha import Access, App, Feature, SessionUser, Settings
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent
from asanoha.workers.consumer_wake import ADVANCE_TASK_NAME
from asanoha.workers.runtime import JobRuntime

BROKER_URL = "redis://127.0.0.1:6379/0"
STREAMS = 50
TARGET = 10.0
USER = SessionUser.of("bench-user", "bench-tenant", ["writer"])
WRITE_QN = "woken:write:post"


class Post(BaseModel):
    stream: str
    n: int


class Noted(BaseModel):
    n: int


class Delivered:
    """Counts deliveries; tells when ``expected`` arrived."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.complete = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, event: StoredEvent, ctx: ConsumerContext) -> None:
        with self._lock:
            self.count += 1
            if self.count >= self.expected:
                self.complete.set()


class WakeTasks:
    """Wake-up tasks published to ``queue`` and started, and the most waiting at once."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.published = 0
        self.started = 0
        self.most_waiting = 0
        self._lock = threading.Lock()

    def on_publish(self, sender: Any = None, routing_key: str = "", **_: Any) -> None:
        if sender == ADVANCE_TASK_NAME and routing_key == self.queue:
            with self._lock:
                self.published += 1
                self.most_waiting = max(self.most_waiting, self.published - self.started)

    def on_start(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == ADVANCE_TASK_NAME:
            with self._lock:
                self.started += 1


def woken_feature(partitions: int, delivered: Delivered) -> Feature:
    feature = Feature("woken")
    noted = feature.event("noted", Noted)

    @feature.write_handler("post", access=Access(roles=["writer"]))
    def post(payload: Post, ctx: Any) -> int:
        return int(ctx.append_event(noted, {"n": payload.n}, stream_id=payload.stream).id)

    @feature.consumer("follow", on=[noted.qn], partitions=partitions)
    def follow(event: StoredEvent, ctx: ConsumerContext) -> None:
        delivered(event, ctx)

    return feature


def run(args: argparse.Namespace) -> tuple[WakeTasks, float]:
    """The wake-up tasks of one burst of ``args.writes`` writes, and its seconds."""
    from celery.signals import before_task_publish, task_prerun

    with scratch_database(args.database_url, "asanoha_bench_wakes") as url:
        prefix = f"benchwake{uuid.uuid4().hex[:8]}"
        settings = Settings(
            database_url=url,
            broker_url=args.broker_url,
            queue_prefix=prefix,
            consumer_tick_interval=0,
            jwt_secret=secrets.token_hex(32),
        )
        delivered = Delivered(args.writes)
        app = App([woken_feature(args.partitions, delivered)], settings)
        tasks = WakeTasks(f"{prefix}.consumers")
        before_task_publish.connect(tasks.on_publish, weak=False)
        task_prerun.connect(tasks.on_start, weak=False)
        try:
            app.create_schema()
            runtime = JobRuntime.start(app)
            try:
                began = time.perf_counter()
                for n in range(args.writes):
                    payload = {"stream": f"stream-{n % STREAMS}", "n": n}
                    app.service.dispatch_write(WRITE_QN, payload, USER)
                if not delivered.complete.wait(args.timeout):
                    raise RuntimeError(f"{delivered.count} of {args.writes} delivered in time")
                seconds = time.perf_counter() - began
                # The last tasks end their rounds before the database goes.
                runtime.drain(timeout=args.timeout)
            finally:
                runtime.stop()
        finally:
            before_task_publish.disconnect(tasks.on_publish)
            task_prerun.disconnect(tasks.on_start)
            app.close()
        return tasks, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000, help="writes in the burst")
    parser.add_argument("--partitions", type=int, default=4, help="the consumer's partitions")
    parser.add_argument("--database-url", default=ADMIN_URL)
    parser.add_argument("--broker-url", default=BROKER_URL)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to deliver")
    parser.add_argument("--quick", action="store_true", help="200 writes")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.writes = 200
    print(describe_setup(args.database_url))
    tasks, seconds = run(args)
    per_thousand = tasks.published * 1000 / args.writes
    ratio = safe_ratio(per_thousand, args.partitions)
    print(
        f"{args.writes:,} writes in {seconds:.1f} s to a consumer of {args.partitions} partitions"
    )
    print(f"wake-up tasks published                 {tasks.published:8d}")
    print(f"per 1,000 writes                        {per_thousand:8.1f}")
    print(f"per 1,000 writes and partition          {ratio or 0:8.2f}   (target <= {TARGET:g})")
    print(f"most waiting in the queue at once       {tasks.most_waiting:8d}")
    write_figures(
        args.json,
        [
            Figure(
                "consumer_wakes.py",
                f"wake-up tasks per 1,000 writes, {args.partitions} partitions",
                per_thousand,
                "tasks",
                peer="partitions",
                peer_value=args.partitions,
                ratio_label="tasks / partitions",
                ratio=ratio,
                target=f"<= {TARGET:g}",
                target_met=at_most(ratio, TARGET),
                note=f"most waiting at once: {tasks.most_waiting}",
            )
        ],
    )


if __name__ == "__main__":
    main()
