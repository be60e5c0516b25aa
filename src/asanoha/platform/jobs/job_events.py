"""A job row's events on the event log: what the live feed shows of a job.

Every end of an attempt appends one event to the row's stream (stream type ``asanoha:job``,
stream id the row's id), in the statement or transaction that writes the end, so the feed
shows exactly the ends that committed:

- ``asanoha:job.succeeded``, ``asanoha:job.failed``, ``asanoha:job.cancelled``: the row ended
  so (a pending row cancelled by an operator too);
- ``asanoha:job.retried``: the attempt ended and another follows (``status`` in the payload
  says why: ``retrying``, ``snoozed``, ``rate_limited``, ...).

``ctx.progress`` appends ``asanoha:job.progress`` to the same stream (``service.
platform_events``). The payload names the job, the attempt and the attempt's status; the
metadata names the user whose write or call started the job (``owner``): the feed shows the
events to that user and to the tenant's operators. They are pruned with the job rows
(``retention.prune_finished``). The version is the stream's next; should another append
have taken it meanwhile, the event is left out rather than the end refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Dialect,
    FromClause,
    Insert,
    bindparam,
    case,
    func,
    literal,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from asanoha.platform.jobs import clocks
from asanoha.platform.jobs.states import PENDING
from asanoha.platform.store import Tables
from asanoha.platform.store.events import partition_key

#: The stream type of a job's events (its stream id is the job row's id).
JOB_STREAM_TYPE = "asanoha:job"
JOB_PROGRESS = "asanoha:job.progress"
JOB_SUCCEEDED = "asanoha:job.succeeded"
JOB_FAILED = "asanoha:job.failed"
JOB_CANCELLED = "asanoha:job.cancelled"
JOB_RETRIED = "asanoha:job.retried"
#: The events of a job row's ends.
END_EVENT_TYPES = (JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED, JOB_RETRIED)
#: Every event type of a job's stream.
JOB_EVENT_TYPES = (JOB_PROGRESS, *END_EVENT_TYPES)
#: Who appends the end events (their ``created_by`` when no user started the job).
SYSTEM = "system"

_COLUMNS = (
    "stream_id",
    "stream_type",
    "tenant_id",
    "version",
    "type",
    "schema_version",
    "payload",
    "metadata",
    "created_at",
    "created_by",
    "partition_key",
)


def end_event(tables: Tables, dialect: Dialect, source: FromClause) -> Insert:
    """The insert of the end event of the row that ``source`` (one row, with the column
    ``state``: the row's state after the end) holds; nothing when ``source`` is empty. Its
    values are the bind parameters ``end_event_values`` gives."""
    events = tables.events
    state: ColumnElement[Any] = source.c.state
    event_type = case(
        (state == PENDING, literal(JOB_RETRIED)), else_=literal(JOB_STREAM_TYPE + ".") + state
    )
    tenant = bindparam("event_tenant", type_=events.c.tenant_id.type)
    stream = bindparam("event_stream", type_=events.c.stream_id.type)
    version = (
        select(func.coalesce(func.max(events.c.version), 0) + 1)
        .where(events.c.tenant_id == tenant, events.c.stream_id == stream)
        .scalar_subquery()
    )
    values = select(
        stream,
        literal(JOB_STREAM_TYPE, events.c.stream_type.type),
        tenant,
        version,
        event_type,
        literal(1),
        bindparam("event_payload", type_=events.c.payload.type),
        bindparam("event_metadata", type_=events.c.metadata.type),
        bindparam("event_at", type_=events.c.created_at.type),
        bindparam("event_by", type_=events.c.created_by.type),
        bindparam("event_partition", type_=events.c.partition_key.type),
    ).select_from(source)
    # A row without a tenant (refused) is on nobody's feed.
    values = values.where(tenant != "")
    dialect_insert = postgresql.insert if dialect.name == "postgresql" else sqlite.insert
    return dialect_insert(events).from_select(_COLUMNS, values).on_conflict_do_nothing()


def row_state(tables: Tables) -> FromClause:
    """The state of the row ``row_id`` (a bind parameter) as ``end_event``'s source, read
    after the end's update in the same transaction."""
    outbox = tables.outbox
    return select(outbox.c.state).where(outbox.c.id == bindparam("row_id")).subquery("ended_row")


def append_end_event(conn: Connection, tables: Tables, row_id: uuid.UUID, status: str) -> None:
    """Append the end event of the row ``row_id``, which ``conn``'s transaction has just
    ended (an operator's cancel, a lost attempt's end): for the transitions outside an
    attempt's end, which ``JobRows`` composes into its own statements."""
    outbox = tables.outbox
    row = conn.execute(
        select(outbox.c.job_qn, outbox.c.attempt, outbox.c.headers).where(outbox.c.id == row_id)
    ).first()
    if row is None:
        return
    headers = row.headers if isinstance(row.headers, Mapping) else {}
    values = end_event_values(
        row_id, row.job_qn, None, int(row.attempt), status, headers, clocks.now()
    )
    conn.execute(end_event(tables, conn.dialect, row_state(tables)), {"row_id": row_id, **values})


def end_event_values(
    row_id: uuid.UUID,
    job_qn: str,
    tenant_id: str | None,
    attempt: int,
    status: str,
    headers: Mapping[str, Any],
    at: Any,
) -> dict[str, Any]:
    """The bind parameters of ``end_event`` for the end of ``attempt`` of ``row_id``."""
    tenant = tenant_id or str(headers.get("tenant_id") or "")
    owner = headers.get("triggered_by")
    owner = owner if isinstance(owner, str) and owner else None
    stream = str(row_id)
    return {
        "event_tenant": tenant,
        "event_stream": stream,
        "event_payload": {"job": job_qn, "attempt": attempt, "status": status},
        "event_metadata": {"owner": owner},
        "event_at": at,
        "event_by": owner or SYSTEM,
        "event_partition": partition_key(tenant, stream),
    }
