"""The aggregate suite runs on Postgres and on SQLite, personal values sealed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from asanoha import SessionUser
from asanoha.handlers import personal_data
from asanoha.platform.model.aggregates import AggregateDef
from asanoha.platform.service.aggregates import AsOf, Loaded
from asanoha.platform.store import StoredEvent, append_event, stream_version
from asanoha.testing import Stack, TestUsers
from tests.integration.aggregates.features import BETWEEN, ledger

ADMIN = TestUsers.admin
OFFICER = SessionUser.of("officer", ADMIN.tenant_id, ["SystemAdmin", "Admin"])
TENANT = ADMIN.tenant_id


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    BETWEEN.clear()
    return asanoha_stack(features=[ledger, personal_data.feature], database=request.param)


def new_account() -> str:
    return f"acct-{uuid.uuid4().hex[:12]}"


def aggregate(stack: Stack, name: str) -> AggregateDef:
    found = stack.registry.find_aggregate(f"ledger:{name}")
    assert found is not None
    return found


def load(stack: Stack, name: str, account: str, as_of: AsOf | None = None) -> Loaded:
    """A load as ``ctx.load`` does it, in a transaction of its own (kept snapshots commit)."""
    with stack.db.begin() as conn:
        return stack.service.aggregates.load(
            conn, aggregate(stack, name), tenant_id=TENANT, stream_id=account, as_of=as_of
        )


def store_old_deposit(stack: Stack, account: str, units: int) -> StoredEvent:
    """A ``deposited`` event as version 1 of the code wrote it (whole units)."""
    with stack.db.begin() as conn:
        return append_event(
            conn,
            stack.db.backend,
            stack.tables,
            tenant_id=TENANT,
            stream_id=account,
            stream_type="ledger",
            expected_version=stream_version(conn, stack.tables, TENANT, account),
            type="ledger:event:deposited",
            payload={"units": units},
            metadata={},
            created_by="old-code",
            schema_version=1,
        )


def snapshot_rows(stack: Stack, account: str) -> list[dict[str, Any]]:
    table = stack.tables.snapshots
    with stack.db.connect() as conn:
        query = select(table).where(table.c.stream_id == account).order_by(table.c.stream_version)
        return [dict(row) for row in conn.execute(query).mappings()]
