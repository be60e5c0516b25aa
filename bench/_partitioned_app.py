"""The application ``asanoha worker --app _partitioned_app:app`` runs in
``bench/partitioned_consumer.py``: a consumer whose handler writes a row per event, with
``BENCH_PARTITIONS`` partitions (settings from the ``ASANOHA_*`` environment)."""

from __future__ import annotations

import os

from asanoha import App, Entity, Feature, fields
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent

EVENT_TYPE = "parted:event:noted"
CONSUMER = "parted:consumer:copy"


def partitioned_feature(partitions: int) -> Feature:
    """The feature with its consumer at ``partitions`` partitions."""
    feature = Feature("parted")
    feature.entity(
        "copy",
        Entity(table="parted_copies", fields={"event_id": fields.integer()}),
    )
    feature.event("noted", None)

    @feature.consumer("copy", on=[EVENT_TYPE], partitions=partitions)
    def copy(event: StoredEvent, ctx: ConsumerContext) -> None:
        ctx.entity("copy").create({"event_id": event.id})

    return feature


app = App(features=[partitioned_feature(int(os.environ.get("BENCH_PARTITIONS", "1")))])
