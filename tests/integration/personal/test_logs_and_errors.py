"""What a job logs and the error a job or a consumer fails with are stored without the
personal values they were given or read: a marker stands for each one."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, ConsumerContext, Entity, Feature, StoredEvent, WriteContext, fields
from asanoha.platform.consumers.drain import ConsumerDeadError
from asanoha.platform.errors import Reasons, ValidationError
from asanoha.platform.model import Backoff
from asanoha.platform.model.users import SYSTEM_ROLE
from asanoha.platform.personal.redaction import MARKER
from asanoha.testing import TestUsers
from asanoha.workers.drain import JobFailedError
from tests.integration.personal.scan import hits
from tests.integration.workers.conftest import job_rows, job_runs

ADMIN = TestUsers.admin
READERS = Access(roles=["Admin", SYSTEM_ROLE])
EMAIL = "carol.ann@example.org"
NAME = "Carol Ann Duffy"
CONTACT = "dave.contact@example.org"

patient = Entity(
    table="plog_patients",
    fields={
        "email": fields.text(personal="self"),
        "name": fields.text(personal="self"),
        "initials": fields.text(personal="self"),
        "plan": fields.text(personal=False, reason="a product name"),
    },
)
contact = Entity(table="plog_contacts", fields={"email": fields.text(personal="self")})

plogs = Feature("plogs")
plogs.crud("patient", patient, write=READERS, read=READERS)
plogs.crud("contact", contact, write=READERS, read=READERS)


@plogs.job("remind", on="plogs:write:patient:create", retries=1, backoff=Backoff.fixed(0.01))
def remind(payload: dict[str, Any], ctx: Any) -> None:
    """Logs its payload's values, its trigger result's and what it reads, then fails with
    one in its message."""
    ctx.log.info("reminding %s (%s, %s)", payload["email"], payload["initials"], payload["plan"])
    ctx.log.info("the row says %s", ctx.trigger.result["name"])
    ctx.log.info(payload["initials"])
    rows = ctx.query_as(ctx.system_user, "plogs:query:contact:list", {})["rows"]
    ctx.log.info("contacts: %s", [row["email"] for row in rows])
    try:
        raise LookupError(f"no mailbox {payload['email']}")
    except LookupError:
        ctx.log.warning("looking up failed", exc_info=True)
    raise RuntimeError(f"mail to {ctx.trigger.result['email']} bounced")


#: What the plain job logs, and the lines it is stored with: unchanged.
PLAIN_LINES = "INFO AL\nINFO 100% of 3 plans for a customer\nWARNING carol: ValueError: Carol Ann"


@plogs.job("plain", manual=True)
def plain(payload: dict[str, Any], ctx: Any) -> None:
    """A job that was given no personal value."""
    ctx.log.info("AL")
    ctx.log.info("100%% of %d plans for %s", 3, "a customer")
    ctx.log.warning("carol", exc_info=ValueError("Carol Ann"))


class RowId(BaseModel):
    id: uuid.UUID


@plogs.write_handler("check-contact", access=READERS)
def check_contact(payload: RowId, ctx: WriteContext) -> Any:
    """Refuses with the value it read in its message and details."""
    row = ctx.entity("contact").get(payload.id)
    raise ValidationError(
        Reasons.VALIDATION_FAILED,
        fields=[{"path": "email", "type": "taken", "message": f"{row['email']} is taken"}],
    )


@plogs.job("check", manual=True)
def check(payload: dict[str, Any], ctx: Any) -> None:
    """Writes, under an idempotency key, what is refused with a personal value."""
    try:
        ctx.write("plogs:write:check-contact", {"id": payload["id"]}, idempotency_key="check-1")
    except ValidationError as refused:
        ctx.log.info("refused: %s", refused.details["fields"][0]["message"])


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[plogs], jobs=True, database=request.param)


def test_a_job_stores_its_logs_and_errors_without_the_personal_values(
    stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="asanoha.job")
    stack.http.write_ok("plogs:write:contact:create", {"email": CONTACT}, ADMIN)
    stack.http.write_ok(
        "plogs:write:patient:create",
        {"email": EMAIL, "name": NAME, "initials": "AL", "plan": "gold"},
        ADMIN,
    )
    with pytest.raises(JobFailedError) as failed:
        stack.drain()
    # What drain() reports is read from the job runs.
    assert f"RuntimeError: mail to {MARKER} bounced" in str(failed.value)
    assert EMAIL not in str(failed.value)

    runs = job_runs(stack, "plogs:job:remind")
    assert [run.status for run in runs] == ["retrying", "failed"]
    for run in runs:
        assert run.error == f"RuntimeError: mail to {MARKER} bounced"
        # A short value (the initials) is replaced only as a whole message.
        assert run.logs == (
            f"INFO reminding {MARKER} (AL, gold)\n"
            f"INFO the row says {MARKER}\n"
            f"INFO {MARKER}\n"
            f"INFO contacts: ['{MARKER}']\n"
            f"WARNING looking up failed: LookupError: no mailbox {MARKER}"
        )
    [row] = job_rows(stack, "plogs:job:remind")
    assert row.last_error == f"RuntimeError: mail to {MARKER} bounced"
    assert hits(stack, [EMAIL, NAME, CONTACT]) == []
    # What goes on to the worker's logger is replaced too.
    logged = [r.getMessage() for r in caplog.records if r.name == "asanoha.job.plogs:job:remind"]
    assert f"reminding {MARKER} (AL, gold)" in logged
    assert not [line for line in logged if EMAIL in line or NAME in line or CONTACT in line]

    # The next attempt on the same worker was given nothing personal: its lines stay as
    # they are, the earlier attempt's values included.
    stack.dispatch_job("plogs:job:plain", {})
    stack.drain()
    [run] = job_runs(stack, "plogs:job:plain")
    assert (run.status, run.logs) == ("succeeded", PLAIN_LINES)


class CeleryLines(logging.Handler):
    """The lines Celery's task tracer logs, as a text formatter writes them (tracebacks
    included), and the ``data`` Celery attaches to them (the JSON format writes it out)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{self.format(record)} {getattr(record, 'data', '')}")


@pytest.fixture
def celery_lines() -> Any:
    tracer = logging.getLogger("celery.app.trace")
    lines, level = CeleryLines(), tracer.level
    tracer.addHandler(lines)
    tracer.setLevel(logging.INFO)
    yield lines
    tracer.removeHandler(lines)
    tracer.setLevel(level)


def test_celerys_retry_and_failure_lines_hold_no_personal_value(
    asanoha_stack: Callable[..., Any], celery_lines: CeleryLines
) -> None:
    stack = asanoha_stack(features=[plogs], jobs=True)
    stack.http.write_ok(
        "plogs:write:patient:create",
        {"email": EMAIL, "name": NAME, "initials": "AL", "plan": "gold"},
        ADMIN,
    )
    with pytest.raises(JobFailedError):
        stack.drain()
    retry = [line for line in celery_lines.lines if " retry: " in line]
    failure = [line for line in celery_lines.lines if "raised unexpected" in line]
    assert len(retry) == 1 and len(failure) == 1, celery_lines.lines
    assert f"mail to {MARKER} bounced" in retry[0]
    assert f"mail to {MARKER} bounced" in failure[0]
    # The traceback the failure line carries too.
    assert "Traceback" in failure[0]
    assert [line for line in celery_lines.lines if EMAIL in line or NAME in line] == []


def test_a_refusal_a_job_keeps_under_its_key_holds_no_personal_value(stack: Any) -> None:
    row = stack.http.write_ok("plogs:write:contact:create", {"email": CONTACT}, ADMIN)
    stack.dispatch_job("plogs:job:check", {"id": row["id"]}, ADMIN)
    stack.drain()
    [run] = job_runs(stack, "plogs:job:check")
    assert (run.status, run.logs) == ("succeeded", f"INFO refused: {MARKER} is taken")
    kept = stack.tables.idempotency
    with stack.db.connect() as conn:
        [body] = conn.execute(select(kept.c.body).where(kept.c.key == "check-1")).scalars()
    assert body["error"]["details"]["fields"][0]["message"] == f"{MARKER} is taken"
    assert hits(stack, [CONTACT]) == []


@plogs.write_handler("check-twice", access=READERS)
def check_twice(payload: RowId, ctx: WriteContext) -> Any:
    """Runs check-contact under a key of its own, in its transaction, and takes the no."""
    try:
        ctx.write("plogs:write:check-contact", {"id": str(payload.id)}, idempotency_key="n-1")
    except ValidationError:
        return "refused"
    return "accepted"


def test_a_refusal_kept_under_the_key_of_an_http_write_holds_no_personal_value(
    stack: Any,
) -> None:
    row = stack.http.write_ok("plogs:write:contact:create", {"email": CONTACT}, ADMIN)
    headers = {"Idempotency-Key": "http-1"}
    first = stack.http.write("plogs:write:check-contact", {"id": row["id"]}, ADMIN, headers)
    # The caller that asked is answered with what it may read; what is kept is not.
    assert first.status_code == 400
    assert CONTACT in first.text
    again = stack.http.write("plogs:write:check-contact", {"id": row["id"]}, ADMIN, headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["error"]["details"]["fields"][0]["message"] == f"{MARKER} is taken"
    # A nested write under a key of its own, inside a write without one.
    nested = stack.http.write_ok("plogs:write:check-twice", {"id": row["id"]}, ADMIN)
    assert nested == "refused"
    kept = stack.tables.idempotency
    with stack.db.connect() as conn:
        bodies = {key: body for key, body in conn.execute(select(kept.c.key, kept.c.body))}
    assert set(bodies) >= {"http-1", "n-1"}
    for key in ("http-1", "n-1"):
        assert bodies[key]["error"]["details"]["fields"][0]["message"] == f"{MARKER} is taken"
    assert hits(stack, [CONTACT]) == []


mail = Entity(table="plog_mail_patients", fields={"email": fields.text(personal="self")})
pmail = Feature("pmail")
pmail.crud("patient", mail, write=READERS, read=READERS)


@pmail.consumer("bounce", on=["pmail:event:patient.created"], max_attempts=1)
def bounce(event: StoredEvent, ctx: ConsumerContext) -> None:
    raise RuntimeError(f"no mailbox for {event.payload['data']['email']}")


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_consumer_stores_its_error_without_the_personal_values(
    asanoha_stack: Callable[..., Any], database: str
) -> None:
    stack = asanoha_stack(features=[pmail], database=database)
    stack.http.write_ok("pmail:write:patient:create", {"email": EMAIL}, ADMIN)
    with pytest.raises(ConsumerDeadError) as dead:
        stack.drain()
    assert f"RuntimeError: no mailbox for {MARKER}" in str(dead.value)
    consumers = stack.tables.consumers
    with stack.db.connect() as conn:
        errors = conn.execute(
            select(consumers.c.last_error).where(consumers.c.name == "pmail:consumer:bounce")
        ).scalars()
        assert list(errors) == [f"RuntimeError: no mailbox for {MARKER}"]
    assert hits(stack, [EMAIL]) == []
