"""What ``@feature.job`` refuses at definition time."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature


def test_an_async_job_is_refused_at_definition():
    feature = Feature("aio")
    with pytest.raises(DefinitionError, match=r"aio:job:fetch.*not async def"):

        @feature.job("fetch", manual=True)
        async def fetch(payload: dict[str, Any], ctx: Any) -> None:
            return None

    assert feature.jobs == []


@pytest.mark.parametrize("retries", [None, -1, 1.5, True])
def test_retries_must_be_a_non_negative_integer(retries):
    with pytest.raises(DefinitionError, match="retries must be a whole number"):
        Feature("r").job("x", manual=True, retries=retries)


def test_retry_options_take_exception_classes():
    with pytest.raises(DefinitionError, match="retry_on= takes exception classes"):
        Feature("r").job("x", manual=True, retry_on=["ValueError"])
    with pytest.raises(DefinitionError, match="no_retry_on= takes exception classes"):
        Feature("r").job("x", manual=True, no_retry_on=[int])
    feature = Feature("r")

    @feature.job("x", manual=True, retry_on=ConnectionError, no_retry_on=(KeyError,))
    def x(payload: dict[str, Any], ctx: Any) -> None:
        return None

    (job,) = feature.jobs
    assert (job.retry_on, job.no_retry_on) == ((ConnectionError,), (KeyError,))


def test_a_schema_on_a_job_without_manual_runs_is_refused():
    from pydantic import BaseModel

    class Report(BaseModel):
        month: str

    with pytest.raises(DefinitionError, match=r"s:job:x: schema= validates .* manual=True"):
        Feature("s").job("x", cron="0 * * * *", schema=Report)
    with pytest.raises(DefinitionError, match=r"s:job:y: schema= must be a pydantic model"):
        Feature("s").job("y", manual=True, schema=dict)  # type: ignore[arg-type]
