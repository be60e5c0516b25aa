"""Every personal value held for one subject, with where it was found (GDPR Art. 15).

Sealed values name their subject in their header, so the export finds them without opening
anything but the subject's own: entity rows, events and job rows of the tenant. The files
its rows hold (``asanoha_files``) are listed too, each as the API describes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, select

from asanoha.platform.model import Registry
from asanoha.platform.personal import cipher
from asanoha.platform.personal.vault import Vault
from asanoha.platform.store.files import files_of_subject
from asanoha.platform.store.tables import Tables

#: Rows read per round trip while scanning.
PAGE = 1000


def _sealed_in(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, sealed text)`` of every sealed value in ``value``."""
    if isinstance(value, str):
        if cipher.is_sealed(value):
            yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from _sealed_in(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _sealed_in(inner, f"{path}.{index}" if path else str(index))


def _of_subject(tenant_id: str, subject: str, value: Any) -> list[tuple[str, str]]:
    found = []
    for path, text in _sealed_in(value):
        parsed = cipher.parse(text)
        if parsed is not None and parsed.key_ref == (tenant_id, subject):
            found.append((path, text))
    return found


def export_subject(
    conn: Connection, vault: Vault, tables: Tables, registry: Registry, tenant_id: str, subject: str
) -> list[dict[str, Any]]:
    """Each personal value of ``subject`` in ``tenant_id``: ``{"table", "id", "path",
    "value"}`` (``FORGOTTEN`` for a forgotten subject)."""
    found: list[dict[str, Any]] = []

    def add(table: str, row_id: Any, value: Any) -> None:
        for path, text in _of_subject(tenant_id, subject, value):
            found.append(
                {"table": table, "id": str(row_id), "path": path, "value": vault.open(text)}
            )

    for entity_def in registry.entities:
        personal = sorted(entity_def.entity.personal_fields)
        if not personal:
            continue
        table = tables.entity(entity_def.key)
        query = select(table.c.id, *(table.c[name] for name in personal)).where(
            table.c.tenant_id == tenant_id
        )
        for row in conn.execute(query).mappings():
            add(table.name, row["id"], {name: row[name] for name in personal})
    events = tables.events
    position = 0
    while True:
        page = conn.execute(
            select(events.c.id, events.c.payload)
            .where(events.c.tenant_id == tenant_id, events.c.id > position)
            .order_by(events.c.id)
            .limit(PAGE)
        ).all()
        for event_id, payload in page:
            add(events.name, event_id, payload)
        if len(page) < PAGE:
            break
        position = page[-1][0]
    outbox = tables.outbox
    jobs = select(outbox.c.id, outbox.c.payload, outbox.c.trigger_result).where(
        outbox.c.headers["tenant_id"].as_string() == tenant_id
    )
    for job_id, payload, result in conn.execute(jobs).all():
        add(outbox.name, job_id, {"payload": payload, "trigger_result": result})
    for stored in files_of_subject(conn, tables, tenant_id, subject):
        found.append(
            {
                "table": tables.files.name,
                "id": str(stored.id),
                "path": f"{stored.entity}.{stored.field}",
                "value": stored.describe(),
            }
        )
    return found
