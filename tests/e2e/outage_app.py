"""The application ``asanoha worker`` runs in the broker outage test: jobs long enough that
the workers hold messages unacknowledged when Redis shuts down, with a visibility timeout
short enough that the messages they held come back within the test."""

from __future__ import annotations

import time
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Access, Entity, Feature, fields

#: Seconds each job runs before it writes its row.
JOB_SECONDS = 0.5
#: The visibility timeout the test's settings give: a job's time limit stays below it.
VISIBILITY_TIMEOUT = 12.0

feature = Feature("outage")
feature.crud(
    "mark",
    Entity(table="outage_marks", fields={"n": fields.integer(required=True)}),
    write=Access(roles=["system", "Admin"]),
    read=Access(roles=["system", "Admin"]),
)


@feature.job("linger", manual=True, timeout=3)
def linger(payload: dict[str, Any], ctx: Any) -> None:
    """Works a while, then writes the row that proves it ran."""
    time.sleep(JOB_SECONDS)
    ctx.write("outage:write:mark:create", {"n": payload["n"]})


app = App([feature])
