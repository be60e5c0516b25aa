"""Events: contiguous stream versions, metadata, projections rebuilt from the log."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import SessionUser, ValidationError
from asanoha.platform.store import read_events, rebuild_projection
from tests.integration.core.conftest import count_rows

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])


def test_each_write_appends_one_event_with_contiguous_versions_and_metadata(core: Any) -> None:
    row = core.service.dispatch_write("instructiongate:write:prompt:create", {"label": "a"}, ADMIN)
    for version in (1, 2):
        core.service.dispatch_write(
            "instructiongate:write:prompt:update",
            {"id": str(row["id"]), "version": version, "changes": {"label": f"v{version + 1}"}},
            ADMIN,
        )
    with core.db.connect() as conn:
        events = read_events(conn, core.tables, stream_id=str(row["id"]))
    assert [e.version for e in events] == [1, 2, 3]
    assert [e.type for e in events] == [
        "instructiongate:event:prompt.created",
        "instructiongate:event:prompt.updated",
        "instructiongate:event:prompt.updated",
    ]
    assert events[0].payload == {"data": {"label": "a"}}
    assert events[2].payload == {"changes": {"label": "v3"}}
    assert events[0].metadata["entry_handler"] == "instructiongate:write:prompt:create"
    assert events[0].metadata["user_id"] == "admin-1"
    assert {e.tenant_id for e in events} == {"tenant-a"}
    assert events[0].id < events[1].id < events[2].id


def test_rebuilt_projection_equals_the_live_rows(core: Any) -> None:
    kept = core.service.dispatch_write(
        "instructiongate:write:prompt:create", {"label": "kept", "body": "b"}, ADMIN
    )
    core.service.dispatch_write(
        "instructiongate:write:prompt:update",
        {"id": str(kept["id"]), "version": 1, "changes": {"label": "kept2"}},
        ADMIN,
    )
    gone = core.service.dispatch_write(
        "instructiongate:write:prompt:create", {"label": "gone"}, ADMIN
    )
    core.service.dispatch_write(
        "instructiongate:write:prompt:delete", {"id": str(gone["id"])}, ADMIN
    )

    def snapshot() -> list[dict[str, Any]]:
        return core.service.dispatch_query("instructiongate:query:prompt:list", {}, ADMIN)["rows"]

    live = snapshot()
    with core.db.begin() as conn:
        replayed = rebuild_projection(
            conn, core.tables, core.registry.entity("instructiongate:prompt")
        )
    assert replayed == 4
    assert snapshot() == live
    assert [r["label"] for r in live] == ["kept2"]


@pytest.mark.parametrize("batch", [1, 2, 1000])
def test_rebuild_merges_a_batch_into_the_rows_the_live_path_wrote(core: Any, batch: int) -> None:
    qn = "instructiongate:write:memo:"
    memo = core.service.dispatch_write(qn + "create", {"title": "a"}, ADMIN)
    memo_id = str(memo["id"])
    for version, title in ((1, "b"), (2, "c")):
        core.service.dispatch_write(
            qn + "update", {"id": memo_id, "version": version, "changes": {"title": title}}, ADMIN
        )
    core.service.dispatch_write(qn + "delete", {"id": memo_id}, ADMIN)
    core.service.dispatch_write(qn + "restore", {"id": memo_id}, ADMIN)
    deleted = core.service.dispatch_write(qn + "create", {"title": "deleted"}, ADMIN)
    core.service.dispatch_write(qn + "delete", {"id": str(deleted["id"])}, ADMIN)

    def snapshot() -> list[dict[str, Any]]:
        listed = core.service.dispatch_query(
            "instructiongate:query:memo:list", {"include_deleted": True}, ADMIN
        )
        rows: list[dict[str, Any]] = listed["rows"]
        return rows

    live = snapshot()
    with core.db.begin() as conn:
        replayed = rebuild_projection(
            conn, core.tables, core.registry.entity("instructiongate:memo"), batch=batch
        )
    assert replayed == 7
    assert snapshot() == live
    assert [(r["title"], r["version"], r["is_deleted"]) for r in live] == [
        ("c", 5, False),
        ("deleted", 2, True),
    ]


def test_invalid_payload_lists_every_field_and_persists_nothing(core: Any) -> None:
    before = count_rows(core)
    with pytest.raises(ValidationError) as raised:
        core.service.dispatch_write(
            "instructiongate:write:prompt:create", {"label": "x" * 201, "body": 5}, ADMIN
        )
    paths = sorted(f["path"] for f in raised.value.details["fields"])
    assert paths == ["body", "label"]
    assert raised.value.http_status == 400
    assert count_rows(core) == before


def test_list_sorts_filters_and_pages_with_a_cursor(core: Any) -> None:
    for label in ("c", "a", "b"):
        core.service.dispatch_write("instructiongate:write:prompt:create", {"label": label}, ADMIN)
    first = core.service.dispatch_query(
        "instructiongate:query:prompt:list", {"sort": ["label"], "limit": 2}, ADMIN
    )
    assert [r["label"] for r in first["rows"]] == ["a", "b"]
    second = core.service.dispatch_query(
        "instructiongate:query:prompt:list",
        {"sort": ["label"], "limit": 2, "cursor": first["next_cursor"]},
        ADMIN,
    )
    assert [r["label"] for r in second["rows"]] == ["c"]
    assert second["next_cursor"] is None
    filtered = core.service.dispatch_query(
        "instructiongate:query:prompt:list", {"filter": {"label": {"in": ["a", "c"]}}}, ADMIN
    )
    assert sorted(r["label"] for r in filtered["rows"]) == ["a", "c"]
    with pytest.raises(ValidationError):
        core.service.dispatch_query("instructiongate:query:prompt:list", {"sort": ["body"]}, ADMIN)
