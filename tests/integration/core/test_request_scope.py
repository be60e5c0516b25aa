"""Who is writing travels as an explicit request: no route around the entry handler or origin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import exc, select

from asanoha import AccessDeniedError, QueryContext, SessionUser
from asanoha.workers.job_context import JobContext, JobMeta
from tests.integration.core.features import gate
from tests.integration.core.scope_features import WAYS_TO_WRITE, scope

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])
ANONYMOUS = SessionUser.anonymous("tenant-a")


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[gate, scope], database=request.param)


def _denied(stack: Any, qn: str, payload: dict[str, Any], user: SessionUser = ADMIN) -> Any:
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_write(qn, payload, user)
    return raised.value


def test_a_query_cannot_dispatch_a_write_even_through_the_service(stack: Any) -> None:
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_query("scope:query:write-through-service", {"label": "x"}, ADMIN)
    assert raised.value.http_status == 403
    assert raised.value.reason == "write_in_query_denied"
    assert raised.value.details["query"] == "scope:query:write-through-service"


@pytest.mark.parametrize("way", WAYS_TO_WRITE)
def test_every_way_a_query_tries_to_write_answers_403_over_http_and_writes_nothing(
    stack: Any, way: str
) -> None:
    row = stack.service.dispatch_write("instructiongate:write:prompt:create", {"label": "p"}, ADMIN)
    payload = {"way": way, "id": str(row["id"])}
    with stack.nothing_written():
        error = stack.http.query_err("scope:query:try-to-write", payload, ADMIN)
    assert (error.http_status, error.code, error.reason) == (
        403,
        "access_denied",
        "write_in_query_denied",
    )
    operation, target = WAYS_TO_WRITE[way]
    assert error.details["handler"] == "scope:query:try-to-write"
    assert (error.details["operation"], error.details["target"]) == (operation, target)
    assert "scope:query:try-to-write" in error.message


@pytest.mark.parametrize("way", WAYS_TO_WRITE)
def test_every_way_a_query_tries_to_write_is_refused_through_dispatch_query(
    stack: Any, way: str
) -> None:
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_query("scope:query:try-to-write", {"way": way}, ADMIN)
    assert (raised.value.http_status, raised.value.reason) == (403, "write_in_query_denied")
    assert raised.value.details["handler"] == "scope:query:try-to-write"


def test_a_query_asked_by_a_write_handler_still_may_not_write(stack: Any) -> None:
    """The query's own write is refused whatever request it runs in."""
    with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        stack.service.dispatch_write("scope:write:write-then-query", {"way": "write"}, ADMIN)
    assert raised.value.reason == "write_in_query_denied"
    assert raised.value.details["handler"] == "scope:query:try-to-write"


def test_a_query_context_offers_neither_service_nor_connection(stack: Any) -> None:
    handler = stack.registry.handler("scope:query:write-through-service")
    ctx = QueryContext(stack.service, None, handler, ADMIN)
    assert [name for name in ("service", "connection") if hasattr(ctx, name)] == []


def test_a_query_connection_is_read_only_on_postgres(stack: Any) -> None:
    if stack.db.dialect != "postgresql":
        pytest.skip("SQLite has no read-only transactions")
    before = stack.row_counts()
    with pytest.raises(exc.DBAPIError, match="read-only"):
        stack.service.dispatch_query("scope:query:insert-on-connection", {"label": "x"}, ADMIN)
    assert stack.row_counts() == before


def test_a_write_from_a_thread_keeps_the_entry_handler(stack: Any) -> None:
    error = _denied(stack, "scope:write:write-from-thread-mid", {"label": "x"})
    assert error.reason == "instruction_field_write_requires_high_risk"
    assert error.details["handler"] == "scope:write:write-from-thread-mid"
    assert error.details["resolved_risk"] == "mid"


@pytest.mark.parametrize(
    ("user_id", "tenant_id", "roles"),
    [("other", "tenant-b", ["Admin"]), ("boss", "tenant-a", ["Admin", "Owner"])],
    ids=["other-tenant", "invented-role"],
)
def test_write_as_refuses_an_identity_wider_than_the_caller(
    stack: Any, user_id: str, tenant_id: str, roles: list[str]
) -> None:
    payload = {"user_id": user_id, "tenant_id": tenant_id, "roles": roles}
    error = _denied(stack, "scope:write:switch", payload)
    assert error.http_status == 403
    assert error.reason == "identity_switch_denied"
    assert error.details["handler"] == "scope:write:switch"


def test_write_as_refuses_the_system_identity_without_its_grant(stack: Any) -> None:
    error = _denied(stack, "scope:write:switch-to-system", {"label": "x"})
    assert error.reason == "system_identity_switch_denied"
    assert error.details["handler"] == "scope:write:switch-to-system"


def test_write_as_a_narrower_identity_of_the_same_tenant_is_allowed(stack: Any) -> None:
    payload = {"user_id": "helper", "tenant_id": "tenant-a", "roles": ["Admin"]}
    row = stack.service.dispatch_write("scope:write:switch", payload, ADMIN)
    assert row["created_by"] == "helper"


def test_write_as_with_a_declared_identity_switch_reaches_another_tenant(stack: Any) -> None:
    payload = {"user_id": "importer", "tenant_id": "tenant-b", "roles": ["Admin"]}
    row = stack.service.dispatch_write("scope:write:switch-declared", payload, ADMIN)
    assert (row["tenant_id"], row["created_by"]) == ("tenant-b", "importer")


def test_a_blank_identity_switch_reason_is_a_definition_error() -> None:
    from asanoha import Access, Feature
    from asanoha.platform.errors import DefinitionError

    with pytest.raises(DefinitionError, match="x:write:s: identity_switch= needs a non-blank"):
        Feature("x").write_handler("s", access=Access(roles=["A"]), identity_switch=" ")


def _run_triggered_job(stack: Any, job_qn: str) -> None:
    """Run the job the write left in the outbox, in process, from its stored headers."""
    outbox = stack.tables.outbox
    with stack.db.connect() as conn:
        row = conn.execute(select(outbox).where(outbox.c.job_qn == job_qn)).mappings().one()
    job = stack.registry.job(job_qn)
    meta = JobMeta.from_headers(row["headers"])
    job.func(row["payload"], JobContext(stack.service, job, meta, task_id="t", retries=0))


def test_a_job_keeps_the_anonymous_origin_of_its_trigger(stack: Any) -> None:
    stack.service.dispatch_write("scope:write:hand-to-job", {"email": "a@b.c"}, ANONYMOUS)
    before = stack.row_counts()
    with pytest.raises(AccessDeniedError) as raised:
        _run_triggered_job(stack, "scope:job:remember-email")
    assert raised.value.reason == "public_intake_required"
    assert raised.value.details["handler"] == "scope:write:hand-to-job"
    assert raised.value.details["fields"] == ["email"]
    assert stack.row_counts() == before


def test_a_job_triggered_through_public_intake_may_write_personal_fields(stack: Any) -> None:
    stack.service.dispatch_write("scope:write:intake-to-job", {"email": "a@b.c"}, ANONYMOUS)
    _run_triggered_job(stack, "scope:job:remember-intake")
    assert stack.row_counts()["instructiongate:contact"] == 1


def test_a_job_triggered_by_a_signed_in_user_may_write_personal_fields(stack: Any) -> None:
    signed_in = SessionUser.of("u-1", "tenant-a", ["Member"])
    stack.service.dispatch_write("scope:write:hand-to-job", {"email": "a@b.c"}, signed_in)
    _run_triggered_job(stack, "scope:job:remember-email")
    assert stack.row_counts()["instructiongate:contact"] == 1
