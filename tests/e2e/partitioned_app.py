"""The application of the partitioned-consumer fleet test (settings from ``ASANOHA_*``): a
consumer with 4 partitions that records every delivery (event, stream, version, process,
time) in a table of its own."""

from __future__ import annotations

import os
import time

from asanoha import Entity, Feature, fields
from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

CONSUMER = "parted:consumer:record"

feature = Feature("parted")
feature.entity(
    "delivery",
    Entity(
        table="parted_deliveries",
        fields={
            "event_id": fields.integer(),
            "stream": fields.text(personal=False, reason="a stream id"),
            "stream_version": fields.integer(),
            "process": fields.integer(),
            "at": fields.number(),
        },
    ),
)
feature.event("noted", None)


@feature.consumer("record", on=["parted:event:noted"], partitions=4)
def record(event: StoredEvent, ctx: ConsumerContext) -> None:
    """One row per delivery: which process delivered it, and when."""
    ctx.entity("delivery").create(
        {
            "event_id": event.id,
            "stream": event.stream_id,
            "stream_version": event.version,
            "process": os.getpid(),
            "at": time.time(),
        }
    )


app = App([feature])
