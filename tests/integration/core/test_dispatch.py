"""Dispatch: nested writes in savepoints, domain events, batches, hooks, the outbox row."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from asanoha import (
    AccessDeniedError,
    NotFoundError,
    SessionUser,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.service import EntityExecutor
from asanoha.platform.store import read_events
from tests.integration.core import features
from tests.integration.core.conftest import count_rows

ADMIN = SessionUser.of("admin-1", "tenant-a", ["Admin"])
W = "instructiongate:write"


def test_a_denied_nested_write_rolls_back_alone_and_keeps_its_outbox_row_out(core: Any) -> None:
    kept = core.service.dispatch_write(
        f"{W}:create-pair-mid", {"first": "kept", "second_body": "evil"}, ADMIN
    )
    counts = count_rows(core)
    assert counts["instructiongate:prompt"] == 1
    assert counts["events"] == 1
    # Only the nested write that committed triggered its job.
    assert counts["outbox"] == 1
    assert kept["label"] == "kept"


def test_unknown_handler_is_404_handler_not_found(core: Any) -> None:
    with pytest.raises(NotFoundError) as raised:
        core.service.dispatch_write(f"{W}:nope", {}, ADMIN)
    assert (raised.value.http_status, raised.value.reason) == (404, "handler_not_found")
    with pytest.raises(NotFoundError):
        core.service.dispatch_query(f"{W}:prompt:create", {}, ADMIN)


def test_domain_events_get_contiguous_versions_and_validated_payloads(core: Any) -> None:
    prompt_id = str(uuid.uuid4())
    first = core.service.dispatch_write(
        f"{W}:annotate-prompt", {"prompt_id": prompt_id, "text": "a"}, ADMIN
    )
    second = core.service.dispatch_write(
        f"{W}:annotate-prompt", {"prompt_id": prompt_id, "text": "b"}, ADMIN
    )
    assert (first["version"], second["version"]) == (1, 2)
    with core.db.connect() as conn:
        events = read_events(conn, core.tables, types=["instructiongate:event:prompt-note-added"])
    assert [e.payload["text"] for e in events] == ["a", "b"]
    assert events[0].stream_type == "instructiongate"


def test_batch_is_one_transaction_and_reports_the_failing_index(core: Any) -> None:
    items = [
        (f"{W}:prompt:create", {"label": "one"}),
        (f"{W}:prompt:create", {"label": "two"}),
        (f"{W}:create-prompt-mid", {"label": "three", "body": "denied"}),
    ]
    with pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_batch(items, ADMIN)
    assert raised.value.details["index"] == 2
    assert count_rows(core)["instructiongate:prompt"] == 0
    results = core.service.dispatch_batch(items[:2], ADMIN)
    assert [r["label"] for r in results] == ["one", "two"]


def test_post_save_hooks_see_the_saved_row(core: Any) -> None:
    features.saved_rows.clear()
    memo = core.service.dispatch_write(f"{W}:create-memo-mid", {"title": "hello"}, ADMIN)
    assert [r["id"] for r in features.saved_rows] == [memo["id"]]


def test_update_without_version_needs_an_explicit_skip(core: Any) -> None:
    row = core.service.dispatch_write(f"{W}:prompt:create", {"label": "a"}, ADMIN)
    with core.db.begin() as conn:
        executor = EntityExecutor(
            core.service.executor_env,
            conn,
            core.registry.entity("instructiongate:prompt"),
            ADMIN,
            None,
            None,
        )
        # A bug in the handler, not in its payload: the TypeError a missing argument raises.
        with pytest.raises(TypeError, match=r"update\(\) of instructiongate:prompt needs version="):
            executor.update(row["id"], {"label": "b"})
        updated = executor.update(row["id"], {"label": "b"}, skip_optimistic_lock=True)
    assert updated["version"] == 2
    with pytest.raises(VersionConflictError):
        core.service.dispatch_write(
            f"{W}:prompt:update", {"id": str(row["id"]), "version": 1, "changes": {}}, ADMIN
        )


def test_triggered_job_payload_and_headers_are_in_the_outbox_row(core: Any) -> None:
    core.service.dispatch_write(f"{W}:create-prompt-high", {"label": "x", "body": "y"}, ADMIN)
    with core.db.connect() as conn:
        row = conn.execute(core.tables.outbox.select()).mappings().one()
    assert row["job_qn"] == "instructiongate:job:notify-high-prompt"
    assert row["payload"] == {"label": "x", "body": "y"}
    assert row["headers"]["tenant_id"] == "tenant-a"
    assert row["headers"]["triggered_by"] == "admin-1"
    assert row["headers"]["trigger_name"] == f"{W}:create-prompt-high"
    assert row["published_at"] is None


def test_text_no_column_can_store_is_refused_at_admission(core: Any) -> None:
    # NUL would fail inside the transaction (jsonb, text); it is refused before it starts.
    payload = {"prompt_id": str(uuid.uuid4()), "text": "nul \x00 inside"}
    with core.nothing_written(), pytest.raises(ValidationError) as raised:
        core.service.dispatch_write(f"{W}:annotate-prompt", payload, ADMIN)
    assert (raised.value.http_status, raised.value.code) == (400, "validation_error")
    assert raised.value.details["handler"] == f"{W}:annotate-prompt"
    assert [field["path"] for field in raised.value.details["fields"]] == ["text"]


def test_query_handlers_get_read_verbs_only(core: Any) -> None:
    with core.nothing_written(), pytest.raises(AccessDeniedError) as raised:
        core.service.dispatch_query("instructiongate:query:find-or-create", {"label": "x"}, ADMIN)
    assert raised.value.reason == "write_in_query_denied"
    assert raised.value.details["operation"] == "create"
    core.service.dispatch_write(f"{W}:prompt:create", {"label": "x"}, ADMIN)
    found = core.service.dispatch_query(
        "instructiongate:query:find-or-create", {"label": "x"}, ADMIN
    )
    assert [row["label"] for row in found] == ["x"]
