"""The application of the job-control end-to-end test: a long job that stops at its
checkpoints once cancelled, and a job that snoozes once (its first run leaves the file
``CONTROL_APP_NAPPED``, read by the worker process)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Feature, Snooze

feature = Feature("control")


@feature.job("long", manual=True, retries=2, timeout=20)
def long(payload: dict[str, Any], ctx: Any) -> None:
    """Runs until cancelled, looking at its row between steps."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.1)
    raise RuntimeError("never cancelled")


@feature.job("nap", manual=True, timeout=20)
def nap(payload: dict[str, Any], ctx: Any) -> Any:
    """Snoozes for a second on its first run, then ends."""
    napped = Path(os.environ["CONTROL_APP_NAPPED"])
    if napped.exists():
        return None
    napped.write_text(str(ctx.attempt))
    return Snooze(1.0)


app = App([feature])
