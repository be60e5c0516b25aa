"""An idempotency key belongs to the caller who sent it, with the access it had.

An anonymous caller is nobody in particular: its key is refused rather than shared with every
other anonymous caller. A repeat by the same user after a change of roles is refused rather
than answered an outcome shaped for the access it no longer has. Through the Python API a
keyed write answers the same types the first time and on every repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import update

from asanoha import AccessDeniedError, SessionUser, UnprocessableError, ValidationError
from asanoha.platform.service.canonical import payload_digest
from asanoha.platform.service.idempotency import Replay
from asanoha.testing import TestUsers
from tests.integration.core.contract_features import contracts
from tests.integration.core.features import gate

ADMIN = TestUsers.admin
PLACE = "contracts:write:place"
CONTACT = "instructiongate:write:submit-contact"


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[contracts, gate], database=request.param)


def test_an_anonymous_callers_key_is_refused_and_nothing_is_written(stack: Any) -> None:
    anonymous = SessionUser.anonymous(ADMIN.tenant_id)
    contact = {"email": "ann@example.org", "topic": "billing"}
    with stack.nothing_written(), pytest.raises(ValidationError) as raised:
        stack.service.dispatch_write(CONTACT, contact, anonymous, idempotency_key="contact-1")
    error = raised.value
    assert (error.http_status, error.reason) == (400, "idempotency_key_anonymous")
    assert error.details["handler"] == CONTACT
    with stack.nothing_written():
        refused = stack.http.write_err(
            CONTACT, contact, anonymous, headers={"Idempotency-Key": "c-1"}
        )
    assert (refused.http_status, refused.reason) == (400, "idempotency_key_anonymous")
    assert "Sign in to send a key" in error.message


def test_a_repeat_after_the_callers_roles_changed_is_refused(stack: Any) -> None:
    """The same user first held a role more (one that may read more fields), then lost it;
    an agent acting through the same user counts as other access too."""
    before = SessionUser.of(ADMIN.id, ADMIN.tenant_id, [*ADMIN.roles, "Auditor"])
    stack.service.dispatch_write(PLACE, {"title": "a"}, before, idempotency_key="o-1")
    for changed in (ADMIN, before.as_agent("run-1")):
        with stack.nothing_written(), pytest.raises(AccessDeniedError) as raised:
            stack.service.dispatch_write(PLACE, {"title": "a"}, changed, idempotency_key="o-1")
        assert (raised.value.http_status, raised.value.reason) == (
            403,
            "idempotency_key_other_access",
        )
        assert raised.value.details == {
            "reason": "idempotency_key_other_access",
            "key": "o-1",
            "handler": PLACE,
        }
    with pytest.raises(UnprocessableError) as reused:
        stack.service.dispatch_write(PLACE, {"title": "b"}, ADMIN, idempotency_key="o-1")
    assert reused.value.reason == "idempotency_key_reused"
    # The same caller with the same roles is answered the first outcome.
    replay = Replay()
    stack.service.dispatch_write(
        PLACE, {"title": "a"}, before, idempotency_key="o-1", replay=replay
    )
    assert replay.replayed
    assert stack.row_counts()["contracts:order"] == 1


def test_a_keyed_write_answers_the_same_types_first_and_on_repeat(stack: Any) -> None:
    first = stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key="t-1")
    replay = Replay()
    again = stack.service.dispatch_write(
        PLACE, {"title": "a"}, ADMIN, idempotency_key="t-1", replay=replay
    )
    assert replay.replayed
    assert again == first
    assert {name: type(value) for name, value in again.items()} == {
        name: type(value) for name, value in first.items()
    }


def test_a_key_kept_by_an_earlier_release_is_still_answered(stack: Any) -> None:
    """An earlier release kept the payload's whole digest, without the caller's access: such
    a key is answered as then (by its principal), until it expires."""
    stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key="e-1")
    handler = stack.registry.handler(PLACE)
    whole = payload_digest(handler.payload_model.model_validate({"title": "a"}))
    table = stack.tables.idempotency
    with stack.db.begin() as conn:
        conn.execute(update(table).where(table.c.key == "e-1").values(payload_digest=whole))
    replay = Replay()
    with stack.nothing_written():
        stack.service.dispatch_write(
            PLACE, {"title": "a"}, ADMIN, idempotency_key="e-1", replay=replay
        )
    assert replay.replayed
    with pytest.raises(UnprocessableError) as reused:
        stack.service.dispatch_write(PLACE, {"title": "b"}, ADMIN, idempotency_key="e-1")
    assert reused.value.reason == "idempotency_key_reused"
