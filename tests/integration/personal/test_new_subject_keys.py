"""A row created with personal values gets its subject's key in the statement that appends
its first event; an id whose subject has a key row already (a forgotten one) is refused."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from asanoha.handlers import personal_data
from asanoha.platform.model import SessionUser
from asanoha.testing import TestUsers
from tests.integration.personal.features import RECEIVED, personal
from tests.integration.personal.scan import hits

ADMIN = TestUsers.admin
OFFICER = SessionUser.of("officer", ADMIN.tenant_id, ["SystemAdmin", "Admin"])
CREATE = "personal:write:customer:create"


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    RECEIVED.clear()
    return asanoha_stack(features=[personal, personal_data.feature], database=request.param)


def key_rows(stack: Any) -> dict[str, Any]:
    keys = stack.tables.subject_keys
    with stack.db.connect() as conn:
        return {row.subject: row for row in conn.execute(keys.select())}


def test_a_created_row_has_its_key_and_reads_back(stack: Any) -> None:
    # The first create of a tenant makes its blind index key too.
    stack.http.write_ok(CREATE, {"email": "first@example.org", "name": "First"}, ADMIN)
    with stack.capture_writes() as statements:
        made = stack.http.write_ok(CREATE, {"email": "eve@example.org", "name": "Eve"}, ADMIN)
    rows = key_rows(stack)
    assert rows[made["id"]].wrapped_key is not None
    shown = stack.http.query_ok("personal:query:customer:detail", {"id": made["id"]}, ADMIN)
    assert (shown["email"], shown["name"]) == ("eve@example.org", "Eve")
    key_inserts = [s for s in statements if "asanoha_subject_keys" in s]
    if stack.db.dialect == "postgresql":
        # One statement appends the event and inserts the key.
        [together] = key_inserts
        assert "asanoha_events" in together
    else:
        assert len(key_inserts) == 1


def test_a_row_under_the_id_of_a_forgotten_subject_is_refused_and_nothing_is_kept(
    stack: Any,
) -> None:
    subject = str(uuid.uuid4())
    stack.http.write_ok(
        "personal-data:write:forget-subject",
        {"subject": subject, "reason": "erasure request before any row"},
        OFFICER,
    )
    before, keys_before = stack.row_counts(), set(key_rows(stack))
    # The refusal comes from the statement that appends the event: it is rolled back.
    refused = stack.http.write_err(
        CREATE, {"id": subject, "email": "mallory@example.org", "name": "M"}, ADMIN
    )
    assert stack.row_counts() == before
    assert set(key_rows(stack)) == keys_before
    assert (refused.http_status, refused.reason) == (409, "subject_key_exists")
    assert refused.details == {"entity": "personal:customer", "id": subject}
    assert key_rows(stack)[subject].wrapped_key is None
    assert hits(stack, ["mallory@example.org"]) == []
