"""The personal data suite runs on Postgres and on SQLite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.personal.features import RECEIVED, personal


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    """The personal feature on each database, personal values sealed under a master key."""
    RECEIVED.clear()
    return asanoha_stack(features=[personal], database=request.param)
