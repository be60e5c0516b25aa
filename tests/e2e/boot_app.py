"""The application of the boot-job end-to-end test: one job that runs once per release when
workers start (settings from ``ASANOHA_*``)."""

from __future__ import annotations

import time
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Feature

feature = Feature("booting")


@feature.job("warm", run_on_boot=True, timeout=20)
def warm(payload: dict[str, Any], ctx: Any) -> None:
    """Takes a moment, so a second run would overlap the first."""
    time.sleep(0.5)


app = App([feature])
