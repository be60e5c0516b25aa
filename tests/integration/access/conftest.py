"""The access suite runs on Postgres and on SQLite (the embedded default)."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.testing import Stack
from asanoha.testing.plugin import StackFactory
from tests.integration.access.features import owned


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest) -> Any:
    """The database of the test's stack."""
    return request.param


@pytest.fixture
def stack(asanoha_stack: StackFactory, database: str) -> Stack:
    """A stack with the ``owned`` feature on the parametrised database."""
    return asanoha_stack(features=[owned], database=database)
