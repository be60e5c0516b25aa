"""The work of ``bench/workflows.py``: a declared workflow that fans out to one no-op step
row per item and fans in with one no-op step, and the plain no-op job it is compared with.

The workflow's first step only hands the item count to the fan-out (``map=`` needs a step
before it to take its items from): a run is ``1 + items + 1`` job rows, the plain side
``items``."""

from __future__ import annotations

from typing import Any

from asanoha import Feature, StepContext

feature = Feature("benchwf")
fan = feature.workflow("fan", manual=True)
WORKFLOW = "benchwf:workflow:fan"
#: The first step's job: its start is the start of a run.
FIRST_STEP = "benchwf:workflow:fan:count"
#: The fan-in step's job: its end is the end of a run.
FAN_IN = "benchwf:workflow:fan:done"
NOOP = "benchwf:job:noop"


@fan.step("count")
def count(payload: dict[str, Any], ctx: StepContext) -> int:
    """The number of items the run fans out to."""
    return int(payload["items"])


@fan.step("noop", after="count", map=lambda ctx: list(range(ctx.results["count"])))
def noop_item(item: int, ctx: StepContext) -> None:
    """Does nothing, once per item (a job row each, in parallel)."""
    return None


@fan.step("done", after="noop")
def done(payload: dict[str, Any], ctx: StepContext) -> None:
    """Does nothing, once every item has succeeded."""
    return None


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    """Does nothing: the plain job of the same no-op."""
    return None
