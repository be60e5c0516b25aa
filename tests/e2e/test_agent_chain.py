"""An agent's mid-risk call, its job run by a real ``asanoha worker`` (prefork): the job's
``forget`` is refused and nothing is forgotten; the same chain begun by a person forgets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from asanoha.app import App
from asanoha.testing import TestUsers
from tests.e2e.conftest import STEP_TIMEOUT, e2e_app, start_asanoha_worker, stop_processes
from tests.integration.agents.chain_features import chain
from tests.integration.agents.features import ASSISTANT
from tests.private_redis import PrivateRedis

pytestmark = pytest.mark.e2e

APP = "tests.e2e.agent_chain_app:app"
AGENT = ASSISTANT.as_agent("run-e2e")


@pytest.fixture
def chain_app(private_redis: PrivateRedis) -> Iterator[App]:
    """This process's view of the application, on its own database and the private Redis."""
    with e2e_app([chain], private_redis.url) as app:
        yield app


def finished_job(app: App, job_qn: str) -> Any:
    """The job row once a worker process has finished it."""
    outbox = app.service.tables.outbox
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        with app.database.connect() as conn:
            row = conn.execute(select(outbox).where(outbox.c.job_qn == job_qn)).one_or_none()
        if row is not None and row.state in ("succeeded", "failed"):
            return row
        if time.monotonic() > deadline:
            raise AssertionError(f"{job_qn} did not finish within {STEP_TIMEOUT} s: {row}")
        time.sleep(0.1)


def count(app: App, table: Any, *where: Any) -> int:
    with app.database.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())


def test_a_worker_refuses_the_forget_of_an_agents_mid_risk_chain(chain_app: App) -> None:
    service = chain_app.service
    notes = service.tables.entity("chain:note")
    events = service.tables.events
    kept = service.dispatch_write("chain:write:note:create", {"title": "kept"}, TestUsers.admin)
    gone = service.dispatch_write("chain:write:note:create", {"title": "gone"}, TestUsers.admin)
    worker = start_asanoha_worker(chain_app.settings, APP, concurrency=2)
    try:
        service.dispatch_write("chain:write:request-cleanup", {"id": str(kept["id"])}, AGENT)
        refused = finished_job(chain_app, "chain:job:cleanup")
        assert refused.state == "failed"
        assert "irreversible operation 'forget'" in refused.last_error
        assert "chain:write:request-cleanup resolves risk 'mid'" in refused.last_error
        assert count(chain_app, notes, notes.c.id == kept["id"]) == 1
        assert count(chain_app, events, events.c.type == "chain:event:note.forgotten") == 0

        service.dispatch_write("chain:write:request-retention", {"id": str(gone["id"])}, AGENT)
        assert finished_job(chain_app, "chain:job:retention").state == "succeeded"
        assert count(chain_app, notes, notes.c.id == gone["id"]) == 0
    finally:
        stop_processes([worker])


def test_a_worker_forgets_in_the_same_chain_begun_by_a_person(chain_app: App) -> None:
    service = chain_app.service
    notes = service.tables.entity("chain:note")
    note = service.dispatch_write("chain:write:note:create", {"title": "x"}, TestUsers.admin)
    worker = start_asanoha_worker(chain_app.settings, APP, concurrency=1)
    try:
        service.dispatch_write(
            "chain:write:request-cleanup", {"id": str(note["id"])}, TestUsers.admin
        )
        assert finished_job(chain_app, "chain:job:cleanup").state == "succeeded"
    finally:
        stop_processes([worker])
    assert count(chain_app, notes) == 0
