"""Stored events keep their version; consumers, rebuilds and ``read_events`` see the newest
shape; a stored version the code cannot read stops the boot."""

from __future__ import annotations

from typing import Any

import pytest

from asanoha import App, SessionUser
from asanoha.platform.consumers import ConsumerContext
from asanoha.platform.store import StoredEvent, read_events, rebuild_projection
from asanoha.platform.store.rebuild import rebuild_guarded
from asanoha.platform.store.upcasting import UnreadableEventVersionError
from tests.integration.history.conftest import (
    CUSTOMER,
    FEATURE,
    RENAMED,
    TENANT,
    crm,
    split_name,
    store_customer_history,
    store_event,
)

ADMIN = SessionUser.of("admin-1", TENANT, ["Admin"])
NEWEST_RENAMED = [
    {"first": "Ada", "last": "Lovelace"},
    {"first": "Ada", "last": "King"},
    {"first": "Augusta", "last": "Byron"},
]


def store_renamed_history(stack: Any) -> None:
    """``renamed`` events of versions 1, 2 and 3 in one stream."""
    store_event(stack, "person-1", RENAMED, {"name": "Ada Lovelace"}, 1)
    store_event(stack, "person-1", RENAMED, {"full_name": "Ada King"}, 2)
    store_event(stack, "person-1", RENAMED, {"first": "Augusta", "last": "Byron"}, 3)


def test_events_of_versions_1_2_and_3_reach_a_consumer_as_version_3(history_stack: Any) -> None:
    seen: list[StoredEvent] = []

    def record(event: StoredEvent, ctx: ConsumerContext) -> None:
        seen.append(event)

    stack = history_stack([crm(record)])
    store_renamed_history(stack)
    stream = store_customer_history(stack)
    stack.drain()

    assert {event.schema_version for event in seen} == {3}
    assert [e.payload for e in seen if e.type == RENAMED] == NEWEST_RENAMED
    customer = [e.payload for e in seen if e.stream_id == stream]
    assert customer == [
        {"data": {"first_name": "Ada", "last_name": "Lovelace", "tier": "basic"}},
        {"changes": {"first_name": "Ada", "last_name": "King"}},
        {"changes": {"tier": "gold"}},
    ]


def test_read_events_gives_the_newest_shape_and_the_store_keeps_the_written_one(
    history_stack: Any,
) -> None:
    stack = history_stack([crm()])
    store_renamed_history(stack)
    with stack.db.connect() as conn:
        events = read_events(conn, stack.tables, types=[RENAMED])
        stored = read_events(conn, stack.tables, types=[RENAMED], upcast=False)
    assert [e.payload for e in events] == NEWEST_RENAMED
    assert [e.schema_version for e in events] == [3, 3, 3]
    assert [e.schema_version for e in stored] == [1, 2, 3]
    assert stored[0].payload == {"name": "Ada Lovelace"}


def test_new_events_are_written_with_the_declared_version(history_stack: Any) -> None:
    stack = history_stack([crm()])
    row = stack.service.dispatch_write(
        f"{FEATURE}:write:customer:create", {"first_name": "Grace", "last_name": "Hopper"}, ADMIN
    )
    with stack.db.connect() as conn:
        stored = read_events(conn, stack.tables, stream_id=str(row["id"]), upcast=False)
    assert [e.schema_version for e in stored] == [3]


@pytest.mark.parametrize("unique", [False, True], ids=["merged", "one-by-one"])
def test_rebuilds_project_the_newest_shape(history_stack: Any, unique: bool) -> None:
    stack = history_stack([crm(unique=unique)])
    stream = store_customer_history(stack)
    entity_def = stack.registry.entity(CUSTOMER)
    expected = {"first_name": "Ada", "last_name": "King", "tier": "gold", "version": 3}

    def row() -> dict[str, Any]:
        found = stack.service.dispatch_query(
            f"{FEATURE}:query:customer:detail", {"id": stream}, ADMIN
        )
        return {key: found[key] for key in expected}

    result = rebuild_guarded(stack.db, stack.tables, entity_def)
    assert result.replayed == 3
    assert row() == expected
    with stack.db.begin() as conn:
        assert rebuild_projection(conn, stack.tables, entity_def) == 3
    assert row() == expected


def test_a_stored_version_without_upcaster_stops_the_boot(history_stack: Any) -> None:
    stack = history_stack([crm()])
    store_renamed_history(stack)
    store_customer_history(stack)
    # The same code without the upcasters from version 1.
    later = App(
        [crm(event_upcasters={2: split_name}, entity_upcasters={})],
        stack.app.settings,
        publish_jobs=False,
    )
    try:
        with pytest.raises(UnreadableEventVersionError) as raised:
            later.create_schema(migrations=None)
    finally:
        later.database.dispose()
    message = str(raised.value)
    assert f"stored events of type {RENAMED!r} have version 1" in message
    assert "no upcaster for version 1" in message
    assert f"'{FEATURE}:event:customer.created' have version 1" in message
    assert f"'{FEATURE}:event:customer.updated' have version 2" in message


def test_a_stored_version_newer_than_the_code_stops_the_boot(history_stack: Any) -> None:
    stack = history_stack([crm()])
    store_event(stack, "person-1", RENAMED, {"first": "A", "last": "B", "middle": "C"}, 4)
    with pytest.raises(UnreadableEventVersionError, match="version 4, newer than the code's"):
        stack.app.create_schema(migrations=None)
