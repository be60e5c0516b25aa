"""The application of the job progress browser test (settings from ``ASANOHA_*``): one job
that reports its progress three times, and before the second and third report waits for a
gate file the test creates (``PROGRESS_GATES`` names their folder)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Feature

feature = Feature("progress")

#: What the job reports, in order: (fraction, message).
STEPS = ((0.25, "fetching rows"), (0.5, "half way"), (1.0, "done"))
#: Seconds the job waits for a gate before it gives up (and fails): below its timeout.
GATE_TIMEOUT = 90.0


def gate(run: str, step: int) -> Path:
    """The file that lets the run ``run`` report step ``step`` (1 or 2; step 0 needs none)."""
    return Path(os.environ["PROGRESS_GATES"]) / f"{run}-{step}"


def wait_for_gate(path: Path) -> None:
    deadline = time.monotonic() + GATE_TIMEOUT
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no gate file {path} within {GATE_TIMEOUT:g} s")
        time.sleep(0.05)


@feature.job("report", manual=True, timeout=120)
def report(payload: dict[str, Any], ctx: Any) -> None:
    """Reports each step; between two, waits until the test opens the gate."""
    for step, (fraction, message) in enumerate(STEPS):
        if step:
            wait_for_gate(gate(payload["run"], step))
        ctx.progress(fraction, message)


app = App([feature])
