"""The application ``asanoha worker --app _fleet_jobs_app:app`` runs in ``bench/fleet.py``: a
no-op job whose first run in each pool process waits at a gate, so that a fleet of workers
starts on its backlog together (settings from the ``ASANOHA_*`` environment; the gate is the
folder ``BENCH_GATE``, the end of every run stamped as ``bench/_stamps.py`` does)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from _stamps import stamp_task_ends
from asanoha import App, Feature

GATED = "fleetjobs:job:noop"
#: In the gate folder: each pool process that waits writes ``waiting-<pid>``; ``go`` opens it.
GATE_ENV = "BENCH_GATE"

feature = Feature("fleetjobs")
_opened = False


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing, once the gate is open."""
    global _opened
    gate = os.environ.get(GATE_ENV)
    if _opened or not gate:
        return None
    (Path(gate) / f"waiting-{os.getpid()}").touch()
    while not (Path(gate) / "go").exists():
        time.sleep(0.005)
    _opened = True
    return None


app = App(features=[feature])
stamp_task_ends(GATED)
