"""The HTTP suite: a stack with the gate and catalog features on Postgres."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from tests.integration.http.features import catalog, gate


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    """A stack with the HTTP suite's features."""
    return asanoha_stack(features=[gate, catalog])


def count_rows(stack: Stack) -> dict[str, int]:
    """Rows of the event store, the outbox, the job runs and every entity table."""
    return stack.row_counts()


def nothing_written(stack: Stack) -> contextlib.AbstractContextManager[None]:
    """Assert that the block issues no INSERT/UPDATE/DELETE and leaves every count as it was."""
    return stack.nothing_written()


def assert_error(error: Any, status: int, code: str, reason: str) -> None:
    """Status, code and reason of an ``HttpError`` at once (clear message on mismatch)."""
    assert (error.http_status, error.code, error.reason) == (status, code, reason), error.body
