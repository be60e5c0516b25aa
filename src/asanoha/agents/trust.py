"""Trust labels on tool results: may an agent read this instruction text as instructions?"""

from __future__ import annotations

from typing import Any

from asanoha.platform.model import SessionUser
from asanoha.platform.service import Service
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.provenance import trust_labels


def label_result(
    service: Service, user: SessionUser, reads: InstructionReads
) -> dict[str, Any] | None:
    """The ``_meta`` trust entry of a tool result, or ``None`` when the call handed no
    instruction text to its handler.

    ``reads`` holds the flagged fields of every row the call read or wrote, whatever
    feature's query or write handed them out. Each row and field gets its label from the
    provenance records (``rows``); ``trust`` is the whole result's: trusted only if every
    label is, so a harness that looks no further treats mixed text as data.
    """
    if not reads.rows:
        return None
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    with service.database.connect() as conn:
        for entity, fields_by_row in sorted(reads.rows.items()):
            found = trust_labels(conn, service.tables, user.tenant_id, entity, fields_by_row)
            for row_id, labels in found.items():
                rows.setdefault(row_id, {}).update(labels)
    every = [label["trust"] for fields in rows.values() for label in fields.values()]
    overall = "trusted" if all(trust == "trusted" for trust in every) else "untrusted"
    return {"trust": overall, "rows": rows}
