"""The application of the workflow end-to-end test (settings from ``ASANOHA_*``).

``flow:workflow:fan`` fans a payload's ``n`` items out to ``square`` and in to ``total``,
which writes a mark row each time its body runs: the test counts those rows, since the
bodies run in other processes. In a worker started with ``E2E_ROLE=victim``, a ``square``
item that starts once the test created the file ``hold`` (in ``E2E_FLAG_DIR``) reports
itself there and blocks, so the test kills that worker while it holds a running attempt.

``flow:workflow:exit-once`` writes a mark row and then ends its pool process on its first
attempt, as an out-of-memory kill would; a step's writes commit with its end, so that row
never commits, and its retry writes it once and succeeds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from asanoha import StepContext
from asanoha.app import App
from asanoha.platform.model import Access, Backoff, Entity, Feature, fields

#: Seconds each fan-out item works: long enough that the fan-out is still going on when
#: the test kills a worker, short enough that 200 items take seconds.
ITEM_SECONDS = 0.05
#: The time limit of a fan-out item. A held item is killed long before it (its soft limit
#: would end it as failed, not crashed); a killed worker's attempt is judged crashed once
#: this, plus the hard limit's grace, has passed.
ITEM_TIMEOUT = 4
#: The time limit of the other steps, whose bodies are quick. Every step's limit plus the
#: hard limit's grace stays below the test's visibility timeout, as the worker demands.
QUICK_TIMEOUT = 3
#: What the fan-in's mark row is labelled with.
FAN_IN_MARK = "fan-in"
#: What the exit-once step's mark row is labelled with.
EXIT_ONCE_MARK = "exit-once"

feature = Feature("flow")
feature.crud(
    "mark",
    Entity(
        table="flow_marks",
        fields={
            "label": fields.text(required=True, personal=False, reason="which step wrote it"),
            "run": fields.text(required=True, personal=False, reason="a run id"),
            "attempt": fields.integer(),
        },
    ),
    write=Access(roles=["system", "Admin"]),
    read=Access(roles=["system", "Admin"]),
)

fan = feature.workflow("fan", manual=True)


@fan.step("items", timeout=QUICK_TIMEOUT)
def items(payload: dict[str, Any], ctx: StepContext) -> list[int]:
    return list(range(payload["n"]))


@fan.step(
    "square",
    after="items",
    map=lambda ctx: ctx.results["items"],
    # A killed worker's attempts end as crashed and count: they need attempts to spare.
    retries=3,
    backoff=Backoff.fixed(0.1),
    timeout=ITEM_TIMEOUT,
)
def square(item: int, ctx: StepContext) -> int:
    if os.environ.get("E2E_ROLE") == "victim":
        _hold_when_asked(ctx)
    time.sleep(ITEM_SECONDS)
    return item * item


def _hold_when_asked(ctx: StepContext) -> None:
    """Once the test asks (the file ``hold``), report this attempt and block until the
    test kills this worker (well within the item's soft time limit)."""
    flags = Path(os.environ["E2E_FLAG_DIR"])
    if not (flags / "hold").exists():
        return
    (flags / f"holding-{os.getpid()}-{ctx.item}").touch()
    time.sleep(ITEM_TIMEOUT * 10)


@fan.step("total", after="square", timeout=QUICK_TIMEOUT)
def total(payload: dict[str, Any], ctx: StepContext) -> list[int]:
    # A job's write commits on its own, before the step's end: one row per run of the body.
    ctx.write(
        "flow:write:mark:create",
        {"label": FAN_IN_MARK, "run": str(ctx.run_id), "attempt": ctx.attempt},
    )
    squares: list[int] = ctx.results["square"]
    return squares


exit_once = feature.workflow("exit-once", manual=True)


@exit_once.step("write-then-exit", retries=1, backoff=Backoff.fixed(0.1), timeout=QUICK_TIMEOUT)
def write_then_exit(payload: dict[str, Any], ctx: StepContext) -> str:
    # No idempotency key: the step's write commits with its end, so attempt 1's row goes
    # with its process.
    written = ctx.write(
        "flow:write:mark:create",
        {"label": EXIT_ONCE_MARK, "run": str(ctx.run_id), "attempt": ctx.attempt},
    )
    if ctx.attempt == 1:
        os._exit(1)
    return str(written["id"])


app = App([feature])
