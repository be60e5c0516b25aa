"""The core suite runs on Postgres and on SQLite (the embedded default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.core.features import gate


@pytest.fixture(params=["postgres", "sqlite"])
def core(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    """A stack with the gate feature on the parametrized database."""
    return asanoha_stack(features=[gate], database=request.param)


def count_rows(stack: Any) -> dict[str, int]:
    """Rows in the event store, the outbox, the job runs and every entity table."""
    counts: dict[str, int] = stack.row_counts()
    return counts
