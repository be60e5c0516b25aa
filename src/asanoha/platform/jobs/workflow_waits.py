"""The waits of workflow runs (``.wait(...)``): an event marks the waits it matches.

Each run writes a row per wait step when it starts (``workflows.start_run``), holding a
digest of the run payload's matched values (``Hold.payload_key``). ``event_matched`` runs in
the delivery of the bundled consumer ``workflow-waits:consumer:match``: it marks each wait of
the event's tenant and type whose key the event's values make (``Hold.event_key``) and whose
run started before the event was appended, once, after taking the run's row as every
transition of a run does first; a wait the run has reached ends as succeeded at once
(``workflows.resolve_held``), one not reached yet finds its mark when it starts.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from asanoha.platform.jobs import clocks, workflows
from asanoha.platform.jobs.enqueue import sealed
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.model.workflows import StepDef, WorkflowDef
from asanoha.platform.store import Tables


@dataclass(frozen=True)
class MatchedEvent:
    """An event as a wait sees it: its position, type, tenant, stream, payload and when it
    was appended."""

    id: int
    type: str
    tenant_id: str
    stream_id: str
    payload: Mapping[str, Any]
    created_at: dt.datetime

    def as_result(self) -> dict[str, Any]:
        """The wait step's result."""
        return {
            "id": self.id,
            "type": self.type,
            "stream_id": self.stream_id,
            "payload": dict(self.payload),
        }


def event_matched(
    conn: Connection,
    tables: Tables,
    workflow_of: workflows.WorkflowLookup,
    waiting: Sequence[tuple[WorkflowDef, StepDef]],
    event: MatchedEvent,
) -> list[OutboxMessage]:
    """The committed ``event`` marks each wait of ``waiting`` (steps waiting for its type)
    it matches, of the runs of its tenant started before it was appended, in ``conn``'s
    transaction: once per wait (its row is marked once), and a wait already reached ends
    as succeeded with the event as its result. Returns the messages of the steps that
    follow, for its caller to publish after commit."""
    waits = tables.workflow_waits
    created_at = clocks.as_utc(event.created_at)
    messages: list[OutboxMessage] = []
    for workflow, step in waiting:
        assert step.hold is not None
        key = step.hold.event_key(event.payload)
        if key is None:
            continue
        candidates = conn.execute(
            select(waits.c.run_id).where(
                waits.c.workflow_qn == workflow.qn,
                waits.c.step == step.name,
                waits.c.tenant_id == event.tenant_id,
                waits.c.event_type == event.type,
                waits.c.match_key == key,
                waits.c.event_id.is_(None),
                waits.c.created_at <= created_at,
            )
        ).scalars()
        for found in list(candidates):
            run_id = uuid.UUID(str(found))
            if workflows.lock_running_run(conn, tables, run_id) is None:
                continue
            marked = conn.execute(
                update(waits)
                .where(waits.c.run_id == run_id, waits.c.step == step.name)
                .where(waits.c.event_id.is_(None))
                .values(
                    event_id=event.id,
                    event=sealed(conn, event.as_result()),
                    matched_at=clocks.now(),
                )
            ).rowcount
            if marked:
                # A wait not reached yet (``None``) finds its row marked when it starts.
                resolved = workflows.resolve_held(
                    conn, tables, workflow_of, run_id, step.name, event.as_result()
                )
                messages.extend(resolved or [])
    return messages
