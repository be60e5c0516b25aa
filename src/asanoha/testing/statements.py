"""Record the SQL statements an engine executes: the writing ones, to prove that nothing was
written, or all of them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

# A plain INSERT/UPDATE/DELETE/MERGE, or one behind a CTE. "SELECT ... FOR UPDATE" is a read.
_WRITE = re.compile(
    r"^\s*(?:(?:INSERT|UPDATE|DELETE|MERGE)\b|WITH\b.*\)\s*(?:INSERT|UPDATE|DELETE|MERGE)\b)",
    re.IGNORECASE | re.DOTALL,
)


def is_write(statement: str) -> bool:
    """Whether ``statement`` changes rows."""
    return _WRITE.match(statement) is not None


@contextmanager
def capture_writes(engine: Engine) -> Iterator[list[str]]:
    """Yield a list that collects every writing statement ``engine`` executes meanwhile.

    Statements are recorded when they are sent, so a write that a later rollback undid is
    still seen: an empty list means the code did not even try to write.
    """
    captured: list[str] = []

    def record(statement: str, parameters: Any) -> None:
        if is_write(statement):
            captured.append(statement)

    with _listening(engine, record):
        yield captured


@contextmanager
def capture_statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Yield a list that collects every statement ``engine`` executes meanwhile, with its
    parameters (to ``EXPLAIN`` it, for example)."""
    captured: list[tuple[str, Any]] = []
    with _listening(engine, lambda statement, parameters: captured.append((statement, parameters))):
        yield captured


@contextmanager
def _listening(engine: Engine, record: Callable[[str, Any], None]) -> Iterator[None]:
    def listener(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        record(statement, parameters)

    event.listen(engine, "before_cursor_execute", listener)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", listener)
