"""The feature settings suite runs on Postgres and on SQLite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asanoha.handlers import feature_config
from tests.integration.feature_settings.features import SEEN, mailer, shop


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    """The mailer, the shop and the bundled config/secrets features, with jobs."""
    SEEN.clear()
    return asanoha_stack(
        features=[mailer, shop, *feature_config.features], jobs=True, database=request.param
    )
