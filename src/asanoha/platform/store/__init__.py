"""Persistence: tables, the event store, entity projections and schema creation."""

from asanoha.platform.store.backends import Backend, PostgresBackend, SqliteBackend
from asanoha.platform.store.database import Database
from asanoha.platform.store.events import (
    EVENT_COLUMNS,
    StoredEvent,
    append_event,
    read_event,
    read_events,
    stream_version,
)
from asanoha.platform.store.projections import apply_entity_event, rebuild_projection
from asanoha.platform.store.tables import Tables, build_tables, platform_tables

__all__ = [
    "EVENT_COLUMNS",
    "Backend",
    "Database",
    "PostgresBackend",
    "SqliteBackend",
    "StoredEvent",
    "Tables",
    "append_event",
    "apply_entity_event",
    "build_tables",
    "platform_tables",
    "read_event",
    "read_events",
    "rebuild_projection",
    "stream_version",
]
