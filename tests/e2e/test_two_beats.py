"""Two ``asanoha beat`` processes side by side (for availability) send every cron tick
twice; each tick is recorded once, by (job, scheduled time), and runs once."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.e2e.test_operator_fleet import (  # noqa: F401 (the fixture)
    APP,
    TICK,
    fleet,
    schedule_a_missed_tick,
    wait_until,
)

pytestmark = pytest.mark.e2e

#: Seconds the processes may take to start and the ticks to run on a loaded machine.
START = 120
SENT = f"Sending due task {TICK}"


def test_two_beats_send_each_tick_and_it_runs_once(fleet, tmp_path: Path):  # noqa: F811
    app, processes = fleet
    processes.run([sys.executable, "-m", "asanoha.cli", "migrate", "--app", APP])
    schedules = [tmp_path / f"beat-{n}-schedule" for n in (1, 2)]
    # Each beat starts with the tick it "missed" and sends it at once (see
    # schedule_a_missed_tick): the test does not wait for a minute boundary.
    for schedule in schedules:
        schedule_a_missed_tick(app, schedule, TICK)
    processes.start(
        "worker",
        [sys.executable, "-m", "asanoha.cli", "worker", "--app", APP, "--concurrency", "1"],
    )
    first = dt.datetime.now(dt.UTC)
    for n, schedule in enumerate(schedules, 1):
        processes.start(
            f"beat-{n}",
            [
                sys.executable, "-m", "asanoha.cli", "beat", "--app", APP,
                "--schedule", str(schedule),
            ],
        )  # fmt: skip

    def beat_log(n: int) -> str:
        return (tmp_path / f"beat-{n}.log").read_text(errors="replace")

    wait_until(
        lambda: all(SENT in beat_log(n) for n in (1, 2)), "both beats sent the tick", processes,
        START,
    )  # fmt: skip
    for n in (1, 2):
        # Stopped: what they sent is counted below (an exited process fails the next wait).
        beat = processes.processes.pop(f"beat-{n}")
        beat.terminate()
        beat.wait(timeout=30)
    last = dt.datetime.now(dt.UTC)
    sends = sum(beat_log(n).count(SENT) for n in (1, 2))

    outbox, runs = app.service.tables.outbox, app.service.tables.job_runs

    def tick_rows() -> list[tuple[str, str]] | None:
        with app.database.connect() as conn:
            rows = conn.execute(
                select(outbox.c.idempotency_key, outbox.c.state).where(outbox.c.job_qn == TICK)
            ).all()
        finished = rows and all(state == "succeeded" for _, state in rows)
        worker = (tmp_path / "worker.log").read_text(errors="replace")
        handled = worker.count("Task asanoha.cron[") >= sends
        return [(key, state) for key, state in rows] if finished and handled else None

    rows = wait_until(tick_rows, "every tick sent was handled and its job ran", processes, START)
    # One row per (job, scheduled minute), whichever beat's message came first: at most one
    # per minute the beats ran in (a minute boundary may fall between their starts).
    span = last.replace(second=0, microsecond=0) - first.replace(second=0, microsecond=0)
    minutes = int(span.total_seconds() // 60) + 1
    assert sends >= 2
    assert 1 <= len(rows) <= min(minutes, sends - 1)
    assert all(key.startswith(f"{TICK}@cron:") for key, _ in rows)
    worker = (tmp_path / "worker.log").read_text(errors="replace")
    assert "asanoha.cron[" in worker and "raised" not in worker
    with app.database.connect() as conn:
        ran = Counter(conn.execute(select(runs.c.task_id).where(runs.c.job_qn == TICK)).scalars())
    assert len(ran) == len(rows) and set(ran.values()) == {1}
