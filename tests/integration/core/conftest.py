"""The core suite runs on Postgres and on SQLite (the embedded default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.integration.core.features import gate


@pytest.fixture(params=["postgres", "sqlite"])
def core(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    """A stack with the gate feature on the parametrized database."""
    return asanoha_stack(features=[gate], database=request.param)


def count_rows(stack: Any) -> dict[str, int]:
    """Rows in the event store, the outbox, the job runs and every entity table."""
    tables = {
        "events": stack.tables.events,
        "outbox": stack.tables.outbox,
        "job_runs": stack.tables.job_runs,
        **stack.tables.entities,
    }
    with stack.db.connect() as conn:
        return {
            name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for name, t in tables.items()
        }


def writes_in(statements: list[str]) -> list[str]:
    """The INSERT/UPDATE/DELETE statements among captured ones."""
    return [
        s
        for s in statements
        if s.lstrip().split(None, 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}
    ]
