"""An application for the two-process consumer test: ``python -m tests.e2e.consumer_app``
advances its consumer until the event count in ``E2E_EXPECTED`` is delivered (or a deadline),
then prints the ids it delivered as JSON."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from asanoha import Entity, Feature, fields
from asanoha.app import App
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.settings import Settings
from asanoha.platform.store import StoredEvent

feature = Feature("relay")
feature.entity(
    "delivery",
    Entity(
        table="relay_deliveries",
        fields={
            "event_id": fields.integer(),
            "process": fields.text(personal=False, reason="a process id"),
        },
    ),
)
feature.event("sent", None)
delivered: list[int] = []


@feature.consumer("copy", on=["relay:event:sent"])
def copy(event: StoredEvent, ctx: ConsumerContext) -> None:
    ctx.entity("delivery").create({"event_id": event.id, "process": str(os.getpid())})
    delivered.append(event.id)


def main() -> int:
    settings = Settings(
        database_url=os.environ["ASANOHA_DATABASE_URL"],
        consumer_wake=False,
        consumer_tick_interval=0,
    )
    app = App([feature], settings)
    expected = int(os.environ["E2E_EXPECTED"])
    deadline = time.monotonic() + float(os.environ.get("E2E_SECONDS", "60"))
    # Small batches, so the two processes take turns many times.
    app.consumers._batch_size = 50
    try:
        while time.monotonic() < deadline:
            app.consumers.run_once()
            [status] = app.consumers.status()
            if status.lag == 0 and _count(app) >= expected:
                break
    finally:
        app.close()
    json.dump(delivered, sys.stdout)
    return 0


def _count(app: Any) -> int:
    from sqlalchemy import func, select

    table = app.service.tables.entity("relay:delivery")
    with app.database.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


if __name__ == "__main__":
    sys.exit(main())
