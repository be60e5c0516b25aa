"""Rows are tenant-scoped: the tenant comes from the session, never from the payload."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import NotFoundError, SessionUser, ValidationError

TENANT_A = SessionUser.of("admin-a", "tenant-a", ["Admin"])
TENANT_B = SessionUser.of("admin-b", "tenant-b", ["Admin"])


@pytest.fixture
def row_of_a(core: Any) -> dict[str, Any]:
    return core.service.dispatch_write(
        "instructiongate:write:prompt:create", {"label": "secret"}, TENANT_A
    )


def test_other_tenant_cannot_read(core: Any, row_of_a: dict[str, Any]) -> None:
    with pytest.raises(NotFoundError):
        core.service.dispatch_query(
            "instructiongate:query:prompt:detail", {"id": str(row_of_a["id"])}, TENANT_B
        )
    listed = core.service.dispatch_query("instructiongate:query:prompt:list", {}, TENANT_B)
    assert listed["rows"] == []


def test_other_tenant_cannot_update_or_delete(core: Any, row_of_a: dict[str, Any]) -> None:
    payload = {"id": str(row_of_a["id"]), "version": 1, "changes": {"label": "stolen"}}
    with pytest.raises(NotFoundError):
        core.service.dispatch_write("instructiongate:write:prompt:update", payload, TENANT_B)
    with pytest.raises(NotFoundError):
        core.service.dispatch_write(
            "instructiongate:write:prompt:delete", {"id": str(row_of_a["id"])}, TENANT_B
        )
    still = core.service.dispatch_query(
        "instructiongate:query:prompt:detail", {"id": str(row_of_a["id"])}, TENANT_A
    )
    assert (still["label"], still["version"]) == ("secret", 1)


def test_tenant_in_the_payload_is_rejected_not_used(core: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        core.service.dispatch_write(
            "instructiongate:write:prompt:create", {"label": "x", "tenant_id": "tenant-b"}, TENANT_A
        )
    assert raised.value.details["fields"][0]["path"] == "tenant_id"
