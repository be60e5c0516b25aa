"""The job suite runs on every broker: Redis (the default) and RabbitMQ."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from sqlalchemy import select, text

from asanoha.platform.model import Feature
from asanoha.testing.stack import amqp_url_for_tests, broker_url_for_tests

BROKERS = {"redis": broker_url_for_tests(), "rabbitmq": amqp_url_for_tests()}
#: A port nothing listens on, per broker scheme.
DEAD_BROKERS = {
    "redis": "redis://127.0.0.1:1/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:1//",
}


@pytest.fixture(params=["redis", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
def broker(request: pytest.FixtureRequest) -> str:
    """The name of the broker the test runs on."""
    name: str = request.param
    return name


@pytest.fixture
def jobs_stack(asanoha_stack: Callable[..., Any], broker: str) -> Callable[..., Any]:
    """``jobs_stack(features)``: a stack with an in-process worker on the test's broker."""

    def make(features: Iterable[Feature], **settings: Any) -> Any:
        return asanoha_stack(
            features=list(features),
            jobs=True,
            settings={"broker_url": BROKERS[broker], **settings},
        )

    return make


def job_runs(stack: Any, job_qn: str | None = None) -> list[Any]:
    """The stack's job run rows in the order they were written."""
    runs = stack.tables.job_runs
    query = select(runs).order_by(runs.c.id)
    if job_qn is not None:
        query = query.where(runs.c.job_qn == job_qn)
    with stack.db.connect() as conn:
        return list(conn.execute(query).all())


def job_rows(stack: Any, job_qn: str | None = None) -> list[Any]:
    """The stack's job rows (the outbox) in the order they were written."""
    outbox = stack.tables.outbox
    query = select(outbox).order_by(outbox.c.created_at)
    if job_qn is not None:
        query = query.where(outbox.c.job_qn == job_qn)
    with stack.db.connect() as conn:
        return list(conn.execute(query).all())


def database_backends(stack: Any) -> set[int]:
    """Server processes connected to the stack's database, but the asking one."""
    with stack.db.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = :name AND pid <> pg_backend_pid()"
            ),
            {"name": stack.database_name},
        )
        return {pid for (pid,) in found}


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for ``condition`` (a closed connection's server process leaves
    ``pg_stat_activity`` a moment after the close)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)
