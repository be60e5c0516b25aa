"""Reading every text, JSON and binary value of every table, to find plaintext in them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select


def stored_text(stack: Any) -> dict[str, list[str]]:
    """Every value of every table of the stack, as text, by table."""
    found: dict[str, list[str]] = {}
    with stack.db.connect() as conn:
        for table in stack.tables.metadata.sorted_tables:
            texts = found.setdefault(table.name, [])
            for row in conn.execute(select(table)).all():
                for value in row:
                    if isinstance(value, bytes):
                        texts.append(value.decode("utf-8", "replace"))
                    elif isinstance(value, dict | list):
                        texts.append(json.dumps(value, ensure_ascii=False))
                    elif value is not None:
                        texts.append(str(value))
    return found


def hits(stack: Any, plaintexts: Iterable[str]) -> list[tuple[str, str]]:
    """``(table, plaintext)`` for each plaintext found anywhere in the database."""
    wanted = list(plaintexts)
    return [
        (table, text)
        for table, values in stored_text(stack).items()
        for text in wanted
        if any(text in value for value in values)
    ]
