"""The HTTP suite: a stack with the gate and catalog features on Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from tests.integration.http.features import catalog, gate


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    """A stack with the HTTP suite's features."""
    return asanoha_stack(features=[gate, catalog])


def count_rows(stack: Stack) -> dict[str, int]:
    """Rows of the event store, the outbox, the job runs and every entity table."""
    tables = {
        "events": stack.tables.events,
        "outbox": stack.tables.outbox,
        "job_runs": stack.tables.job_runs,
        **stack.tables.entities,
    }
    with stack.db.connect() as conn:
        return {
            name: conn.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in tables.items()
        }


@contextmanager
def nothing_written(stack: Stack) -> Iterator[None]:
    """Assert that the block issues no INSERT/UPDATE/DELETE and leaves every count as it was."""
    before = count_rows(stack)
    with stack.capture_writes() as statements:
        yield
    assert statements == [], f"writes were sent: {statements}"
    assert count_rows(stack) == before


def assert_error(error: Any, status: int, code: str, reason: str) -> None:
    """Status, code and reason of an ``HttpError`` at once (clear message on mismatch)."""
    assert (error.http_status, error.code, error.reason) == (status, code, reason), error.body
