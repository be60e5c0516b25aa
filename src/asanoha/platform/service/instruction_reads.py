"""The instruction text one call read or returned: what its result may carry.

A trust label must follow the text, not the handler's shape: a custom query, another
feature's query or a write that returns rows can all hand ``read_as_instruction`` values to an
agent. The entity reader and executor note every row they hand to a handler, so the result
is labelled by the flagged fields of the rows the call actually saw, whatever feature
declared them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asanoha.platform.model import EntityDef, instruction_fields


@dataclass
class InstructionReads:
    """``{entity key: {row id: {field, ...}}}``: the flagged fields holding text, per row."""

    rows: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def note(self, entity_def: EntityDef, rows: Iterable[Mapping[str, Any]]) -> None:
        """Remember the flagged fields of ``rows`` that hold a value (an empty one is no text)."""
        flagged = instruction_fields(entity_def.entity)
        if not flagged:
            return
        for row in rows:
            present = {name for name in flagged if row.get(name) not in (None, "")}
            if present and "id" in row:
                by_row = self.rows.setdefault(entity_def.key, {})
                by_row.setdefault(str(row["id"]), set()).update(present)
