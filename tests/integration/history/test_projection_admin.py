"""The bundled projection-admin handler: a system administrator rebuilds the rows of the
caller's tenant in a job; a row without events fails it with its id until orphans may be
dropped; everyone else is refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from asanoha import AccessDeniedError, SessionUser, ValidationError
from asanoha.handlers import projection_admin
from asanoha.platform.errors import UnprocessableError
from asanoha.workers import JobFailedError
from tests.integration.history.conftest import CUSTOMER, crm
from tests.integration.history.test_rebuild import (
    ADMIN_A,
    ADMIN_B,
    TENANT_A,
    TENANT_B,
    create,
    insert_orphan,
    rows,
)

REBUILD = "projection-admin:write:rebuild"
OPERATOR = SessionUser.of("ops-1", TENANT_A, ["SystemAdmin"])


def job_state(stack: Any) -> tuple[str, str | None]:
    outbox = stack.tables.outbox
    query = select(outbox.c.state, outbox.c.last_error).order_by(outbox.c.created_at.desc())
    with stack.db.connect() as conn:
        row = conn.execute(query.where(outbox.c.job_qn == projection_admin.REBUILD_JOB)).first()
    return row.state, row.last_error


@pytest.mark.parametrize("database", ["postgres", "sqlite"])
def test_a_system_admin_rebuilds_the_tenants_rows_in_a_job(asanoha_stack: Any, database: str):
    stack = asanoha_stack(features=[crm(), projection_admin.feature], jobs=True, database=database)
    create(stack, "Ada")
    create(stack, "Grace", ADMIN_B)
    orphan_a, orphan_b = insert_orphan(stack, TENANT_A), insert_orphan(stack, TENANT_B)
    before = rows(stack)

    queued = stack.service.dispatch_write(REBUILD, {"entity": CUSTOMER}, OPERATOR)
    assert (queued["job"], queued["state"]) == (projection_admin.REBUILD_JOB, "pending")
    with pytest.raises(JobFailedError):
        stack.drain()
    state, error = job_state(stack)
    assert state == "failed"
    assert error is not None and "Rebuilding crm:customer stopped: 1 row(s)" in error
    assert orphan_a in error
    assert rows(stack) == before

    stack.service.dispatch_write(REBUILD, {"entity": CUSTOMER, "drop_orphans": True}, OPERATOR)
    stack.drain()
    assert job_state(stack) == ("succeeded", None)
    after = rows(stack)
    assert orphan_a not in after
    # Another tenant's rows, its orphan included, are left alone.
    assert orphan_b in after
    assert rows(stack, TENANT_B) == {k: v for k, v in before.items() if v[1] == TENANT_B}


def test_only_system_admins_rebuild_and_only_entities_of_the_application(
    asanoha_stack: Any,
) -> None:
    stack = asanoha_stack(features=[crm(), projection_admin.feature])
    with stack.nothing_written(), pytest.raises(AccessDeniedError):
        stack.service.dispatch_write(REBUILD, {"entity": CUSTOMER}, ADMIN_A)
    with stack.nothing_written(), pytest.raises(UnprocessableError, match="no entity"):
        stack.service.dispatch_write(REBUILD, {"entity": "crm:nothing"}, OPERATOR)
    with stack.nothing_written(), pytest.raises(ValidationError):
        stack.service.dispatch_write(REBUILD, {"entity": ""}, OPERATOR)
