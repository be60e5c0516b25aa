"""Personal values of domain events (``feature.event(..., pii={...})``), and the events
consumers are given: opened."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from asanoha.platform.model.handlers import EventDef
from asanoha.platform.personal.sentinel import FORGOTTEN
from asanoha.platform.personal.subject_keys import TENANT_SUBJECT
from asanoha.platform.personal.vault import Vault, reveal, vault_of

if TYPE_CHECKING:
    # Only named: ``store.events`` opens the events it reads through this module.
    from asanoha.platform.store.events import StoredEvent


def seal_event_payload(
    vault: Vault, event_def: EventDef, tenant_id: str, stream_id: str, body: Mapping[str, Any]
) -> dict[str, Any]:
    """``body`` with the fields of the event's ``pii`` map sealed for their subjects."""
    pii = event_def.pii if isinstance(event_def.pii, Mapping) else {}
    sealed = dict(body)
    for name, stance in pii.items():
        if sealed.get(name) is None:
            continue
        if stance == "tenant":
            subject = TENANT_SUBJECT
        elif isinstance(stance, Mapping):
            named = body.get(stance["of"])
            subject = stream_id if named is None or named is FORGOTTEN else str(named)
        else:
            subject = stream_id
        sealed[name] = vault.seal(tenant_id, subject, event_def.qn, name, sealed[name])
    return sealed


def reveal_event(conn: Connection, event: StoredEvent) -> StoredEvent:
    """``event`` with its personal values opened (``FORGOTTEN`` once forgotten), as
    consumers get it."""
    payload = reveal(conn, event.payload)
    return event if payload is event.payload else dataclasses.replace(event, payload=payload)


def reveal_events(conn: Connection, events: Sequence[StoredEvent]) -> list[StoredEvent]:
    """Each of ``events`` as ``reveal_event`` gives it, the keys of all of them read in one
    query."""
    vault = vault_of(conn)
    if vault is not None and vault.data.encrypts:
        vault.prepare([event.payload for event in events])
    return [reveal_event(conn, event) for event in events]
