"""Entity retention: the daily job deletes or anonymizes the rows older than ``keep_for``
through the write pipeline, per tenant; ``block_delete`` refuses removing a younger row and
persists nothing. Rows are aged by moving their ``created_at`` into the past."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select, update
from starlette.testclient import TestClient

from asanoha import (
    FORGOTTEN,
    Access,
    Agent,
    Entity,
    Feature,
    JobFailedError,
    Retention,
    SessionUser,
    WriteContext,
    fields,
)
from asanoha.console import mount_console
from asanoha.handlers import job_admin, personal_data
from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE
from asanoha.handlers.retention import APPLY_JOB, APPLY_WRITE
from asanoha.platform.store import rebuild_projection
from asanoha.testing import TestUsers
from asanoha.testing.users import TENANT_A, TENANT_B
from asanoha.workers.cron_tasks import enqueue_cron_tick
from tests.integration.console.test_console_pages import sign_in

ADMIN = TestUsers.admin
OTHER = TestUsers.other_tenant
ADMINS = Access(roles=["Admin"])
TICK = "2026-05-04T02:53:00+00:00"

keep = Feature("keep")
keep.crud(
    "note",
    Entity(
        table="rt_notes",
        fields={"title": fields.text(required=True, personal=False, reason="fixture")},
        retention=Retention(keep_for="30d", strategy="hard_delete"),
    ),
    write=ADMINS,
    read=ADMINS,
)
keep.crud(
    "member",
    Entity(
        table="rt_members",
        fields={
            "email": fields.text(personal="self"),
            "plan": fields.text(personal=False, reason="fixture"),
        },
        soft_delete=True,
        retention=Retention(keep_for="30d", strategy="anonymize"),
    ),
    write=ADMINS,
    read=ADMINS,
)
keep.crud(
    "invoice",
    Entity(
        table="rt_invoices",
        fields={
            "number": fields.text(required=True, personal=False, reason="fixture"),
            "buyer": fields.text(personal="self"),
        },
        retention=Retention(keep_for="3650d", strategy="block_delete"),
    ),
    write=ADMINS,
    read=ADMINS,
)


class InvoiceId(BaseModel):
    id: uuid.UUID


@keep.write_handler("forget-invoice", access=ADMINS, agent=Agent(risk="high"))
def forget_invoice(payload: InvoiceId, ctx: WriteContext) -> Any:
    return ctx.entity("invoice").forget(payload.id)


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(
        features=[keep, job_admin.feature, personal_data.feature],
        database=request.param,
        jobs=True,
        tenants=lambda: [TENANT_A, TENANT_B],
    )


@pytest.fixture
def sqlite_stack_with_jobs(asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(
        features=[keep, job_admin.feature], database="sqlite", jobs=True, tenants=lambda: [TENANT_A]
    )


def create(stack: Any, entity: str, data: dict[str, Any], user: SessionUser = ADMIN) -> str:
    return str(stack.http.write_ok(f"keep:write:{entity}:create", data, user)["id"])


def age(stack: Any, entity: str, ids: list[str], days: int) -> None:
    """Move the rows' ``created_at`` ``days`` into the past."""
    table = stack.tables.entity(f"keep:{entity}")
    with stack.db.begin() as conn:
        for row_id in ids:
            where = table.c.id == uuid.UUID(row_id)
            created = conn.execute(select(table.c.created_at).where(where)).scalar_one()
            moved = created - dt.timedelta(days=days)
            conn.execute(update(table).where(where).values(created_at=moved))


def row_ids(stack: Any, entity: str, tenant: str = TENANT_A) -> set[str]:
    table = stack.tables.entity(f"keep:{entity}")
    with stack.db.connect() as conn:
        query = select(table.c.id).where(table.c.tenant_id == tenant)
        return {str(found) for found in conn.execute(query).scalars()}


def event_types(stack: Any, stream_id: str) -> list[str]:
    events = stack.tables.events
    with stack.db.connect() as conn:
        query = select(events.c.type).where(events.c.stream_id == stream_id)
        return list(conn.execute(query.order_by(events.c.version)).scalars())


def run_retention(stack: Any, tenant: str = TENANT_A, payload: Any = None) -> None:
    """Run the job as an operator does (``asanoha jobs run``), then let it settle."""
    stack.dispatch_job(APPLY_JOB, payload or {}, SessionUser.system(tenant))
    stack.drain()


def rebuild(stack: Any, entity: str) -> None:
    with stack.db.begin() as conn:
        rebuild_projection(conn, stack.tables, stack.registry.entity(f"keep:{entity}"))


def test_hard_delete_removes_only_the_rows_older_than_keep_for(stack: Any) -> None:
    old = [create(stack, "note", {"title": f"old {n}"}) for n in range(2)]
    young = create(stack, "note", {"title": "young"})
    almost = create(stack, "note", {"title": "29 days"})
    age(stack, "note", old, days=31)
    age(stack, "note", [almost], days=29)
    run_retention(stack)
    assert row_ids(stack, "note") == {young, almost}
    for row_id in old:
        # Deleted as any delete is: its event, written by the system user.
        assert event_types(stack, row_id) == ["keep:event:note.created", "keep:event:note.deleted"]
    assert event_types(stack, young) == ["keep:event:note.created"]
    # The rows are gone from their streams, not only from the table.
    rebuild(stack, "note")
    assert row_ids(stack, "note") == {young, almost}


def test_anonymize_forgets_only_the_old_rows_personal_values(stack: Any) -> None:
    old = create(stack, "member", {"email": "ada@example.org", "plan": "gold"})
    deleted = create(stack, "member", {"email": "bob@example.org", "plan": "tin"})
    young = create(stack, "member", {"email": "cy@example.org", "plan": "basic"})
    stack.http.write_ok("keep:write:member:delete", {"id": deleted}, ADMIN)
    age(stack, "member", [old, deleted], days=31)
    run_retention(stack)

    def detail(row_id: str) -> Any:
        return stack.http.query_ok("keep:query:member:detail", {"id": row_id}, ADMIN)

    # The row stays, its own personal values read as forgotten, the others as they were.
    assert (detail(old)["email"], detail(old)["plan"]) == (FORGOTTEN, "gold")
    assert (detail(young)["email"], detail(young)["plan"]) == ("cy@example.org", "basic")
    # A soft-deleted row still held its values: they go too.
    assert row_ids(stack, "member") == {old, deleted, young}
    assert event_types(stack, old)[-1] == "retention:event:row-anonymized"
    assert event_types(stack, deleted)[-1] == "retention:event:row-anonymized"
    assert event_types(stack, young) == ["keep:event:member.created"]
    # The next run finds nothing left to forget; a rebuild brings no value back.
    before = event_types(stack, old)
    run_retention(stack)
    assert event_types(stack, old) == before
    rebuild(stack, "member")
    assert detail(old)["email"] == FORGOTTEN
    assert detail(young)["email"] == "cy@example.org"


def test_a_row_whose_subject_was_forgotten_already_is_not_anonymized_again(stack: Any) -> None:
    # Forgetting the subject keeps the row (personal-data:write:forget-subject): the job
    # finds nothing left to forget in it.
    old = create(stack, "member", {"email": "ada@example.org", "plan": "gold"})
    age(stack, "member", [old], days=31)
    operator = SessionUser.of("ops", TENANT_A, [SYSTEM_ADMIN_ROLE])
    forget = {"subject": old, "reason": "asked to be forgotten"}
    stack.http.write_ok("personal-data:write:forget-subject", forget, operator)
    run_retention(stack)
    assert event_types(stack, old) == ["keep:event:member.created"]
    detail = stack.http.query_ok("keep:query:member:detail", {"id": old}, ADMIN)
    assert (detail["email"], detail["plan"]) == (FORGOTTEN, "gold")


def test_block_delete_refuses_removing_a_young_row_and_persists_nothing(stack: Any) -> None:
    young = create(stack, "invoice", {"number": "2026-1", "buyer": "ada@example.org"})
    for qn in ("keep:write:invoice:delete", "keep:write:forget-invoice"):
        with stack.nothing_written():
            error = stack.http.write_err(qn, {"id": young}, ADMIN)
        assert (error.http_status, error.code, error.reason) == (
            409,
            "conflict",
            "retention_blocks_delete",
        )
        assert error.details["entity"] == "keep:invoice"
        assert error.details["id"] == young
        assert error.details["keep_for"] == "3650d"
        deletable_from = dt.datetime.fromisoformat(error.details["deletable_from"])
        assert deletable_from > dt.datetime.now(dt.UTC) + dt.timedelta(days=3649)
        assert "3650d" in error.message and error.details["deletable_from"] in error.message
    assert error.details["operation"] == "forget"
    # The job has nothing to do for block_delete: it does not even run for it.
    assert row_ids(stack, "invoice") == {young}
    assert event_types(stack, young) == ["keep:event:invoice.created"]


def test_block_delete_lets_a_row_older_than_keep_for_go(stack: Any) -> None:
    old = create(stack, "invoice", {"number": "2014-1", "buyer": "ada@example.org"})
    forgotten = create(stack, "invoice", {"number": "2014-2", "buyer": "bob@example.org"})
    age(stack, "invoice", [old, forgotten], days=3651)
    stack.http.write_ok("keep:write:invoice:delete", {"id": old}, ADMIN)
    stack.http.write_ok("keep:write:forget-invoice", {"id": forgotten}, ADMIN)
    assert row_ids(stack, "invoice") == set()


def test_a_daily_tick_applies_each_tenants_retention_as_an_ordinary_job(stack: Any) -> None:
    ours = create(stack, "note", {"title": "ours"})
    theirs = create(stack, "note", {"title": "theirs"}, OTHER)
    kept = create(stack, "note", {"title": "kept"}, OTHER)
    age(stack, "note", [ours, theirs], days=40)
    app = stack.app
    placed = enqueue_cron_tick(app.service, app.settings, APPLY_JOB, TICK, tenants=app.tenants)
    assert len(placed) == 2  # one run per tenant
    stack.drain()
    assert row_ids(stack, "note", TENANT_A) == set()
    assert row_ids(stack, "note", TENANT_B) == {kept}
    # Each run is a job like any other: the console's jobs page lists it from this query.
    for tenant in (TENANT_A, TENANT_B):
        operator = SessionUser.of("ops", tenant, [SYSTEM_ADMIN_ROLE])
        [run] = stack.http.query_ok("job-admin:query:jobs", {"job": APPLY_JOB}, operator)
        assert (run["tenant"], run["state"]) == (tenant, "succeeded")


def test_a_manual_run_can_name_one_entity(stack: Any) -> None:
    note = create(stack, "note", {"title": "old"})
    member = create(stack, "member", {"email": "ada@example.org"})
    age(stack, "note", [note], days=31)
    age(stack, "member", [member], days=31)
    run_retention(stack, payload={"entity": "keep:member"})
    assert row_ids(stack, "note") == {note}
    assert event_types(stack, member)[-1] == "retention:event:row-anonymized"
    with pytest.raises(JobFailedError, match="no entity 'keep:invoice' declares a retention"):
        run_retention(stack, payload={"entity": "keep:invoice"})


def test_the_retention_write_is_the_systems_alone(stack: Any) -> None:
    note = create(stack, "note", {"title": "old"})
    age(stack, "note", [note], days=31)
    with stack.nothing_written():
        error = stack.http.write_err(APPLY_WRITE, {"entity": "keep:note", "id": note}, ADMIN)
    assert (error.http_status, error.reason) == (403, "role_required")


def test_a_run_an_agents_mid_risk_call_started_deletes_nothing(stack: Any) -> None:
    # The job's writes carry the chain of the call that started it: an agent's run of
    # job-admin:write:run (mid risk) stays below high, so the irreversible gate holds.
    note = create(stack, "note", {"title": "old"})
    age(stack, "note", [note], days=31)
    operator = SessionUser.of("ops-agent", TENANT_A, [SYSTEM_ADMIN_ROLE]).as_agent("run-1")
    stack.http.write_ok("job-admin:write:run", {"job": APPLY_JOB}, operator)
    with pytest.raises(JobFailedError, match="irreversible operation 'delete'"):
        stack.drain()
    assert row_ids(stack, "note") == {note}
    assert event_types(stack, note) == ["keep:event:note.created"]
    # The same run started by a person deletes the row.
    person = SessionUser.of("ops", TENANT_A, [SYSTEM_ADMIN_ROLE])
    stack.http.write_ok("job-admin:write:run", {"job": APPLY_JOB}, person)
    stack.drain()
    assert row_ids(stack, "note") == set()


def test_the_consoles_jobs_page_shows_the_retention_runs(sqlite_stack_with_jobs: Any) -> None:
    stack = sqlite_stack_with_jobs
    note = create(stack, "note", {"title": "old"})
    age(stack, "note", [note], days=31)
    run_retention(stack)
    with TestClient(mount_console(stack.app.build_http(), stack.app)) as client:
        sign_in(client, stack.app.settings, SessionUser.of("ops", TENANT_A, [SYSTEM_ADMIN_ROLE]))
        page = client.get("/console/jobs", params={"job": APPLY_JOB})
    assert page.status_code == 200
    rows = page.text.split('id="job-rows"', 1)[1]
    assert f">{APPLY_JOB}</a></td>" in rows
    assert "state-succeeded" in rows and f"<td>{TENANT_A}</td>" in rows
    # Its run form offers the job: an operator runs it from there.
    assert f"<option>{APPLY_JOB}</option>" in page.text
