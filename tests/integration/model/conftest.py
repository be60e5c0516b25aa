"""The model suite: behaviour that touches the database runs on Postgres and SQLite; checks
made before any statement (payload shapes, schemas) run on SQLite alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.model.features import shop


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[shop], database=request.param)


@pytest.fixture
def sqlite_stack(asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[shop], database="sqlite")
