"""Who sees which event on the feed, and how: the query API's rules, applied per event.

An event reaches a caller only when a query of the caller could show its row: the event is
of the caller's tenant; it is on the stream of an entity row (entity events, and domain
events appended to a row's stream) whose standard queries admit the caller; and where the
entity's read rule confines the caller to its own rows (``ownership``), the row is the
caller's. Fields the caller may not read (``field_access``) are left out of the payload;
personal values are opened as the query API opens them, ``[forgotten]`` once forgotten.
Events on streams that are no entity row have no read rule and reach no one: default deny.
The platform's job and workflow events (``asanoha:job.*``, ``asanoha:workflow.*``,
``service.platform_events``) reach the user who started the job or run and the tenant's
operators, and the operators of the operator tenant for every tenant.

Ownership is decided on the row as it is when the event is sent (what a query would answer
then), read once per batch for all clients; a row that is gone (hard delete) is nobody's.

A file field shows the file as a read shows it, ``{id, name, content_type, size, sha256,
url}``, ``null`` once the file is deleted: the reader looks the files of a batch up once
(``look_up_files``, through ``Files.found``), and each message mints its links
(``Files.described``) for the view it is encoded for, the fields its caller may read.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from sqlalchemy import Connection

from asanoha.platform.model import EntityDef, Registry, SessionUser
from asanoha.platform.model.access import Access
from asanoha.platform.model.scopes import admits_caller
from asanoha.platform.service import field_access, ownership
from asanoha.platform.service.files import Files, file_fields
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.platform_events import OPERATOR_ROLE, PLATFORM_STREAM_TYPES
from asanoha.platform.store import StoredEvent
from asanoha.platform.store.files import StoredFile
from asanoha.platform.store.projections import Row

#: Payload keys of entity events that hold field values (``created``: data, ``updated``:
#: changes); a hidden field is left out of them as out of the payload itself.
FIELD_MAPS = ("data", "changes")


@dataclass
class FeedItem:
    """One event as the reader prepared it for every client: upcast, personal values
    opened, with the row it is about when an owner rule needs it."""

    event: StoredEvent
    entity: EntityDef | None
    #: The entity row (opened) when the entity's reads are confined to owners; else ``None``.
    row: Row | None = None
    #: The encoded message per set of hidden fields (clients sharing roles share it).
    encoded: dict[frozenset[str], bytes] = field(default_factory=dict)
    #: File field -> the live file its value names (``None``: deleted since), for the
    #: fields of an entity event that name a file (``FeedAccess.look_up_files``); ``None``:
    #: the event names no file.
    files: dict[str, StoredFile | None] | None = None

    @property
    def id(self) -> int:
        """The event's global position (the message's id)."""
        return self.event.id


class FeedAccess:
    """The feed's access decisions, from the registry's rules (built once per process)."""

    def __init__(
        self,
        registry: Registry,
        owner_rules: OwnerRules,
        operator_tenant: str | None = None,
        *,
        files: Files,
    ) -> None:
        self._registry = registry
        self._owner_rules = owner_rules
        #: Looks up the files events name and mints their links, as reads do.
        self._files = files
        self._file_fields: dict[str, frozenset[str]] = {}
        self._read_query: dict[str, tuple[str, Access] | None] = {}
        #: The tenant that operates every tenant (``ASANOHA_OPERATOR_TENANT``): its
        #: operators follow every tenant's job and workflow events, as its console lists
        #: every tenant's jobs and runs.
        self._operator_tenant = operator_tenant

    def sees_every_tenant(self, user: SessionUser) -> bool:
        """Whether ``user`` (an operator of the operator tenant) receives the platform's
        events of every tenant."""
        return (
            self._operator_tenant is not None
            and user.tenant_id == self._operator_tenant
            and OPERATOR_ROLE in user.roles
            and not user.is_anonymous
        )

    def entity_of(self, event: StoredEvent) -> EntityDef | None:
        """The entity whose row ``event`` is about (``None``: none)."""
        return self._registry.find_entity(event.stream_type)

    def needs_row(self, entity_def: EntityDef) -> bool:
        """Whether an owner rule may confine reads of ``entity_def`` (then the reader loads
        its rows with the events)."""
        return ownership.declared_rule(self._registry, entity_def, "read") is not None

    def read_query(self, entity_def: EntityDef) -> tuple[str, Access] | None:
        """The QN and rule of the entity's standard queries (``None``: it has none)."""
        key = entity_def.key
        if key not in self._read_query:
            self._read_query[key] = next(
                (
                    (handler.qn, handler.access)
                    for handler in self._registry.handlers
                    if handler.kind == "query"
                    and handler.crud is not None
                    and handler.feature == entity_def.feature
                    and handler.crud.entity == entity_def.name
                ),
                None,
            )
        return self._read_query[key]

    def look_up_files(self, conn: Connection, items: Sequence[FeedItem]) -> None:
        """Note on each of ``items`` the files its file fields name (``FeedItem.files``), as
        they are now: one query per tenant for the whole batch."""
        named: list[tuple[FeedItem, str, uuid.UUID]] = []
        for item in items:
            names = self._file_fields_of(item.entity)
            if not names:
                continue
            for key in FIELD_MAPS:
                values = item.event.payload.get(key)
                if not isinstance(values, dict):
                    continue
                for name in names & values.keys():
                    file_id = _file_id(values[name])
                    if file_id is not None:
                        named.append((item, name, file_id))
        if not named:
            return
        found = self._files.found(conn, {(i.event.tenant_id, f) for i, _, f in named})
        for item, name, file_id in named:
            if item.files is None:
                item.files = {}
            item.files[name] = found.get((item.event.tenant_id, file_id))

    def _file_fields_of(self, entity_def: EntityDef | None) -> frozenset[str]:
        if entity_def is None:
            return frozenset()
        names = self._file_fields.get(entity_def.key)
        if names is None:
            names = self._file_fields[entity_def.key] = frozenset(file_fields(entity_def))
        return names

    def visible(self, item: FeedItem, user: SessionUser) -> bool:
        """Whether ``user`` may receive ``item``."""
        event, entity_def = item.event, item.entity
        if event.stream_type in PLATFORM_STREAM_TYPES and self.sees_every_tenant(user):
            return True
        if event.tenant_id != user.tenant_id or user.is_anonymous:
            return False
        if event.stream_type in PLATFORM_STREAM_TYPES:
            return OPERATOR_ROLE in user.roles or event.metadata.get("owner") == user.id
        if entity_def is None:
            return False
        # Whom its read query admits: a scoped token's scopes must reach it as well.
        query = self.read_query(entity_def)
        if query is None or not admits_caller(user, *query):
            return False
        rule = self._owner_rules.rule(entity_def, "read", user)
        if rule is None:
            return True
        return item.row is not None and ownership.owned(rule, item.row, user)

    def message(self, item: FeedItem, user: SessionUser) -> bytes:
        """``item`` as JSON for ``user`` (call ``visible`` first)."""
        hidden = self._hidden(item, user)
        encoded = item.encoded.get(hidden)
        if encoded is None:
            encoded = pydantic_core.to_json(self._shown(item, hidden), serialize_unknown=True)
            item.encoded[hidden] = encoded
        return encoded

    def shown(self, item: FeedItem, user: SessionUser) -> dict[str, Any]:
        """``item`` as ``user`` sees it, as a dict (what stream handlers get)."""
        return self._shown(item, self._hidden(item, user))

    def _shown(self, item: FeedItem, hidden: frozenset[str]) -> dict[str, Any]:
        if not item.files:
            return shown_event(item.event, hidden)
        # The links are minted here, per view (the fields it leaves out get none): a message
        # encoded once is shared only by callers who may read the same fields of the row.
        files = {
            name: None if stored is None else self._files.described(stored)
            for name, stored in item.files.items()
            if name not in hidden
        }
        return shown_event(item.event, hidden, files)

    def _hidden(self, item: FeedItem, user: SessionUser) -> frozenset[str]:
        if item.entity is None:
            return frozenset()
        return field_access.hidden_fields(item.entity, user)


def shown_event(
    event: StoredEvent, hidden: frozenset[str], files: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The event as the feed shows it, without the ``hidden`` fields; ``files``: what each
    file field shows instead of the file id the event holds."""
    return {
        "id": event.id,
        "type": event.type,
        "streamId": event.stream_id,
        "streamType": event.stream_type,
        "version": event.version,
        "createdAt": event.created_at,
        "createdBy": event.created_by,
        "payload": _shown_payload(event.payload, hidden, files or {}),
    }


def _shown_payload(
    payload: Mapping[str, Any], hidden: frozenset[str], files: Mapping[str, Any]
) -> dict[str, Any]:
    if not hidden and not files:
        return dict(payload)
    shown: dict[str, Any] = {}
    for key, value in payload.items():
        if key in hidden:
            continue
        if key in FIELD_MAPS and isinstance(value, dict):
            value = field_access.without_hidden(value, hidden)
            named = files.keys() & value.keys()
            if named:
                value = {**value, **{name: files[name] for name in named}}
        shown[key] = value
    return shown


def _file_id(value: Any) -> uuid.UUID | None:
    """The file id a file field's value in an event holds (``None``: none, or no id)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None
