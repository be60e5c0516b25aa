"""A workflow run's events on the event log: what the live feed shows of a run.

Each transition of a run appends one event to the run's stream (stream type
``asanoha:workflow``, stream id the run's id), in the transaction that makes it, so the feed
shows exactly the transitions that committed:

- ``asanoha:workflow.started``: the run was written with its first steps;
- ``asanoha:workflow.step``: one of its steps succeeded (a wait matched, an approval given);
- ``asanoha:workflow.succeeded``, ``asanoha:workflow.failed``, ``asanoha:workflow.cancelled``:
  the run ended so.

As a job's events (``job_events``), the metadata names the user who started the run
(``owner``): the feed shows them to that user and to the tenant's operators. They are pruned
with the job rows' events. Should another append have taken the stream's next version
meanwhile, the event is left out rather than the transition refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.dialects import postgresql, sqlite

from asanoha.platform.jobs import clocks
from asanoha.platform.store import Tables
from asanoha.platform.store.events import partition_key

#: The stream type of a run's events (its stream id is the run's id).
WORKFLOW_STREAM_TYPE = "asanoha:workflow"
WORKFLOW_STARTED = "asanoha:workflow.started"
WORKFLOW_STEP = "asanoha:workflow.step"
WORKFLOW_SUCCEEDED = "asanoha:workflow.succeeded"
WORKFLOW_FAILED = "asanoha:workflow.failed"
WORKFLOW_CANCELLED = "asanoha:workflow.cancelled"
#: Every event type of a run's stream.
WORKFLOW_EVENT_TYPES = (
    WORKFLOW_STARTED,
    WORKFLOW_STEP,
    WORKFLOW_SUCCEEDED,
    WORKFLOW_FAILED,
    WORKFLOW_CANCELLED,
)


def append_run_event(
    conn: Connection,
    tables: Tables,
    run_id: uuid.UUID,
    event_type: str,
    payload: Mapping[str, Any],
    headers: Mapping[str, Any],
) -> None:
    """Append ``event_type`` with ``payload`` to the stream of the run ``run_id`` (whose job
    rows carry ``headers``: its tenant and who started it), in ``conn``'s transaction."""
    tenant = str(headers.get("tenant_id") or "")
    if not tenant:
        return
    owner = headers.get("triggered_by")
    owner = owner if isinstance(owner, str) and owner else None
    events, stream = tables.events, str(run_id)
    version = conn.execute(
        select(func.coalesce(func.max(events.c.version), 0)).where(
            events.c.tenant_id == tenant, events.c.stream_id == stream
        )
    ).scalar_one()
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(
        dialect_insert(events)
        .values(
            stream_id=stream,
            stream_type=WORKFLOW_STREAM_TYPE,
            tenant_id=tenant,
            version=int(version) + 1,
            type=event_type,
            schema_version=1,
            payload=dict(payload),
            metadata={"owner": owner},
            created_at=clocks.now(),
            created_by=owner or "system",
            partition_key=partition_key(tenant, stream),
        )
        .on_conflict_do_nothing()
    )
