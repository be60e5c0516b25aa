"""Trust labels on query results: may an agent read these instruction fields as instructions?"""

from __future__ import annotations

from typing import Any

from asanoha.platform.model import HandlerDef, SessionUser, instruction_fields
from asanoha.platform.service import Service
from asanoha.platform.service.provenance import trust_labels


def label_query_result(
    service: Service, handler: HandlerDef, user: SessionUser, data: Any
) -> dict[str, Any] | None:
    """The ``_meta`` trust entry of a query result, or ``None`` when it holds no instructions.

    A standard list or detail gets a label per row and flagged field from the provenance
    records, and ``trust`` for the whole result (trusted only if every label is). A custom
    query of a feature with flagged fields cannot be traced to rows: it is untrusted.
    """
    registry = service.registry
    if handler.crud is None:
        flagged = any(
            instruction_fields(entity_def.entity)
            for entity_def in registry.entities
            if entity_def.feature == handler.feature
        )
        if not flagged:
            return None
        return {"trust": "untrusted", "why": "a custom query: provenance cannot be traced"}
    entity_def = registry.entity(f"{handler.feature}:{handler.crud.entity}")
    if not instruction_fields(entity_def.entity):
        return None
    rows = data.get("rows", []) if handler.crud.verb == "list" else [data]
    ids = [str(row["id"]) for row in rows if isinstance(row, dict) and "id" in row]
    with service.database.connect() as conn:
        labels = trust_labels(conn, service.tables, user.tenant_id, entity_def, ids)
    every = [label["trust"] for fields in labels.values() for label in fields.values()]
    overall = "trusted" if all(t == "trusted" for t in every) else "untrusted"
    return {"trust": overall, "entity": entity_def.key, "rows": labels}
