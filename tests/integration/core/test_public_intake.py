"""Anonymous callers may write personal fields only through a public-intake access rule."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import AccessDeniedError, SessionUser
from tests.integration.core.conftest import count_rows

ANONYMOUS = SessionUser.anonymous("tenant-a")


def test_anonymous_write_of_personal_field_without_public_intake_is_denied(core: Any) -> None:
    before = count_rows(core)
    with core.capture_writes() as statements, pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_write(
            "instructiongate:write:submit-topic", {"email": "a@b.c", "topic": "x"}, ANONYMOUS
        )
    assert raised.value.reason == "public_intake_required"
    assert raised.value.details["fields"] == ["email"]
    assert statements == []
    assert count_rows(core) == before


def test_anonymous_write_without_personal_fields_is_allowed(core: Any) -> None:
    row = core.service.dispatch_write(
        "instructiongate:write:submit-topic", {"topic": "x"}, ANONYMOUS
    )
    assert row["created_by"] == "anonymous"


def test_public_intake_admits_personal_fields(core: Any) -> None:
    row = core.service.dispatch_write(
        "instructiongate:write:submit-contact", {"email": "a@b.c"}, ANONYMOUS
    )
    assert row["email"] == "a@b.c"


def test_anonymous_caller_is_denied_a_role_rule(core: Any) -> None:
    with pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_write(
            "instructiongate:write:prompt:create", {"label": "x"}, ANONYMOUS
        )
    assert raised.value.reason == "role_required"
