"""Events of the platform itself, not of a feature: a job's progress (``ctx.progress``);
the ends of its row are appended by the row's owner (``jobs.job_events``).

They go to the event log like every event, so the live feed (``platform/feed``) carries them
to browsers, gap-safe and resumable, from whichever process runs the job. Their stream is the
job row (``asanoha:job``, the row id); their metadata names the user whose write or call
started the job (``owner``), who sees them on the feed, as do the tenant's operators.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.errors import VersionConflictError
from asanoha.platform.jobs.job_events import JOB_EVENT_TYPES, JOB_PROGRESS, JOB_STREAM_TYPE
from asanoha.platform.jobs.workflow_events import WORKFLOW_EVENT_TYPES, WORKFLOW_STREAM_TYPE
from asanoha.platform.service.validation import invalid_field
from asanoha.platform.store import Database, StoredEvent, Tables, append_event
from asanoha.platform.store.events import stream_version

#: Every event type the platform appends (the feed reads them beside the features'): a
#: job's progress, its row's ends (``jobs.job_events``) and a workflow run's transitions
#: (``jobs.workflow_events``).
PLATFORM_EVENT_TYPES = (*JOB_EVENT_TYPES, *WORKFLOW_EVENT_TYPES)
#: The stream types of the platform's own events: each is shown to the user who started
#: the job or run, and to the tenant's operators.
PLATFORM_STREAM_TYPES = frozenset({JOB_STREAM_TYPE, WORKFLOW_STREAM_TYPE})
#: Holders of this role see every job event of their tenant on the feed.
OPERATOR_ROLE = "SystemAdmin"
#: Longest progress message kept.
MAX_MESSAGE_LENGTH = 500
#: Tries when another progress call of the same job took the stream version first.
APPEND_TRIES = 5


def append_job_progress(
    database: Database,
    tables: Tables,
    *,
    tenant_id: str,
    job_id: str,
    job_qn: str,
    owner: str | None,
    fraction: Any,
    message: str | None = None,
    within: Connection | None = None,
) -> StoredEvent:
    """Append ``asanoha:job.progress`` for the job row ``job_id`` in a transaction of its
    own (committed at once, so the feed shows it while the job runs; the job's own writes
    are not part of it), or in ``within``'s (a step's on SQLite, whose one writer the step
    holds). ``fraction`` is a number from 0 to 1; a bad one is a ``ValidationError`` naming
    the job."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not math.isfinite(fraction)
        or not 0 <= fraction <= 1
    ):
        raise invalid_field(job_qn, "fraction", "value_error", "fraction: a number from 0 to 1")
    if message is not None and not isinstance(message, str):
        raise invalid_field(job_qn, "message", "string_type", "message: a text or None")
    payload = {
        "job": job_qn,
        "fraction": float(fraction),
        "message": None if message is None else message[:MAX_MESSAGE_LENGTH],
    }

    def append(conn: Connection) -> StoredEvent:
        return append_event(
            conn,
            database.backend,
            tables,
            tenant_id=tenant_id,
            stream_id=job_id,
            stream_type=JOB_STREAM_TYPE,
            expected_version=stream_version(conn, tables, tenant_id, job_id),
            type=JOB_PROGRESS,
            payload=payload,
            metadata={"owner": owner},
            created_by=owner or "system",
        )

    if within is not None:
        return append(within)
    for attempt in range(APPEND_TRIES):
        with database.begin() as conn:
            try:
                return append(conn)
            except VersionConflictError:
                if attempt == APPEND_TRIES - 1:
                    raise
    raise AssertionError("unreachable")


#: The stream type of the platform's audit events (a stream per audited call).
AUDIT_STREAM_TYPE = "asanoha:audit"


def append_audit_event(
    conn: Connection,
    database: Database,
    tables: Tables,
    *,
    tenant_id: str,
    event_type: str,
    payload: dict[str, Any],
    request_id: str,
    by: str,
) -> StoredEvent:
    """Append the audit event ``event_type`` on a stream of its own in ``tenant_id``, in
    ``conn``'s transaction (``service.cross_tenant``: a read of another tenant's rows)."""
    return append_event(
        conn,
        database.backend,
        tables,
        tenant_id=tenant_id,
        stream_id=str(uuid.uuid4()),
        stream_type=AUDIT_STREAM_TYPE,
        expected_version=0,
        type=event_type,
        payload=payload,
        metadata={"request_id": request_id},
        created_by=by,
    )
