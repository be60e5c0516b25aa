"""The application of the busy-pool test (settings from ``ASANOHA_*``): a job that holds its
pool slot until a file appears, and a consumer that records each event it is given."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from asanoha import Access, Entity, Feature, fields
from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

#: Seconds the job waits for its release file at most.
HOLD_LIMIT = 25


class Ring(BaseModel):
    n: int


feature = Feature("busypool")
feature.entity(
    "delivery",
    Entity(table="busypool_deliveries", fields={"event_id": fields.integer()}),
)
feature.event("rang", None)


@feature.write_handler("ring", access=Access(roles=["Admin"]))
def ring(payload: Ring, ctx: Any) -> int:
    return int(
        ctx.append_event("busypool:event:rang", {"n": payload.n}, stream_id=str(uuid.uuid4())).id
    )


@feature.consumer("record", on=["busypool:event:rang"])
def record(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("delivery").create({"event_id": event.id})


@feature.job("hold", manual=True, timeout=HOLD_LIMIT + 5)
def hold(payload: dict[str, Any], ctx: Any) -> None:
    """Holds its pool slot until ``payload["release"]`` exists (or ``HOLD_LIMIT`` passed)."""
    release = Path(payload["release"])
    deadline = time.monotonic() + HOLD_LIMIT
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


app = App([feature])
