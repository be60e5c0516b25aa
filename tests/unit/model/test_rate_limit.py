"""``RateLimit`` is checked when it is declared; an app without Redis refuses to count it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, App, DefinitionError, Feature, RateLimit, Settings


class Empty(BaseModel):
    pass


@pytest.mark.parametrize("rate", ["lots", "20/fortnight", ""])
def test_a_rate_that_is_no_rate_is_a_definition_error(rate: str) -> None:
    with pytest.raises(DefinitionError, match="is no rate; write it as '20/minute'"):
        RateLimit(rate)


def test_an_unknown_scope_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match=r"per= must be one of \['user', 'tenant'"):
        RateLimit("20/minute", per="session")  # type: ignore[arg-type]


def test_rate_limit_takes_a_rate_limit() -> None:
    feature = Feature("limits")
    with pytest.raises(DefinitionError, match="rate_limit= takes RateLimit"):
        feature.write_handler("x", access=Access(roles=["Admin"]), rate_limit="20/minute")  # type: ignore[arg-type]


def test_an_app_without_redis_refuses_a_rate_limited_handler(tmp_path: Any) -> None:
    feature = Feature("limits")

    @feature.write_handler("x", access=Access(roles=["Admin"]), rate_limit=RateLimit("1/second"))
    def x(payload: Empty, ctx: Any) -> None: ...

    settings = Settings(
        database_url=f"sqlite+pysqlite:///{tmp_path}/db.sqlite3", broker_url="memory://"
    )
    with pytest.raises(DefinitionError, match="ASANOHA_RATE_LIMIT_URL"):
        App(features=[feature], settings=settings)
