"""Erasure: the personal values of a forgotten row leave its stream and the job payloads.

Forgetting keeps the events (their order, types and versions are the history) and replaces
every personal value in them with ``null``; the same goes for job payloads that carried the
row: a job written with the row's write holds a copy of its values, and a job triggered by one
of the row's events holds that event's payload (which names no row id, only its stream).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, bindparam, or_, select, update

from asanoha.platform.store.events import read_events
from asanoha.platform.store.tables import Tables

#: Events rewritten per round trip: a stream of any length is scrubbed page by page.
PAGE = 1000
#: Where a job payload names the row it was written for: the write's own payload (an update's
#: ``id``), the handler's result, or the trigger it carries.
_ROW_ID_PATHS: tuple[tuple[str, ...], ...] = (
    ("id",),
    ("result", "id"),
    ("trigger", "id"),
    ("trigger", "result", "id"),
)


def scrub_values(value: Any, names: Collection[str]) -> Any:
    """``value`` with every object member called one of ``names`` set to ``None``, at any depth."""
    if isinstance(value, dict):
        return {
            key: None if key in names else scrub_values(inner, names)
            for key, inner in value.items()
        }
    if isinstance(value, list):
        return [scrub_values(inner, names) for inner in value]
    return value


def scrub_stream(
    conn: Connection,
    tables: Tables,
    *,
    tenant_id: str,
    stream_id: str,
    types: Collection[str],
    names: Collection[str],
) -> int:
    """Null the fields ``names`` in the ``data``/``changes`` of the stream's events of ``types``
    (all of them, however long the stream); return how many events changed."""
    events = tables.events
    rewrite = (
        update(events)
        .where(events.c.id == bindparam("event_id"))
        .values(payload=bindparam("new_payload"))
    )
    position, changed = 0, 0
    while True:
        page = read_events(
            conn,
            tables,
            after=position,
            limit=PAGE,
            types=types,
            stream_id=stream_id,
            tenant_id=tenant_id,
        )
        rows = []
        for stored in page:
            payload = {
                key: scrub_values(inner, names) if key in ("data", "changes") else inner
                for key, inner in stored.payload.items()
            }
            if payload != stored.payload:
                rows.append({"event_id": stored.id, "new_payload": payload})
        if rows:
            conn.execute(rewrite, rows)
            changed += len(rows)
        if len(page) < PAGE:
            return changed
        position = page[-1].id


def scrub_job_payloads(
    conn: Connection, tables: Tables, *, tenant_id: str, row_id: str, names: Collection[str]
) -> int:
    """Null the fields ``names`` in the payloads, and the stored trigger results, of the
    tenant's jobs written for ``row_id`` or triggered by an event of its stream; return how
    many changed."""
    outbox, events = tables.outbox, tables.events
    streams_events = select(events.c.id).where(
        events.c.tenant_id == tenant_id, events.c.stream_id == row_id
    )
    carries_row = or_(
        *(outbox.c.payload[path].as_string() == row_id for path in _ROW_ID_PATHS),
        # A write-triggered job keeps the handler's result (the row as saved) for
        # ``ctx.trigger.result``.
        outbox.c.trigger_result["id"].as_string() == row_id,
        # An event-triggered job's payload is the event's: it is found by its trigger.
        outbox.c.headers["trigger_event_id"].as_integer().in_(streams_events),
    )
    query = select(outbox.c.id, outbox.c.payload, outbox.c.trigger_result).where(
        carries_row, outbox.c.headers["tenant_id"].as_string() == tenant_id
    )
    rows = []
    for job_id, payload, result in conn.execute(query).all():
        scrubbed = scrub_values(payload, names)
        scrubbed_result = scrub_values(result, names) if result is not None else None
        if scrubbed != payload or scrubbed_result != result:
            rows.append({"job_id": job_id, "new_payload": scrubbed, "new_result": scrubbed_result})
    if rows:
        conn.execute(
            update(outbox)
            .where(outbox.c.id == bindparam("job_id"))
            .values(payload=bindparam("new_payload"), trigger_result=bindparam("new_result")),
            rows,
        )
    return len(rows)
