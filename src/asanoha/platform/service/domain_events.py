"""Domain events: a handler appends its feature's declared events (``ctx.append_event``).

A domain event is a write of its own, and meets the same rules as an entity write where they
apply: a write inside a query is refused; its personal fields (the event's ``pii=`` map) meet
the public-intake gate and are sealed under their subject's key before the append; on an
entity's stream it takes the row's lock and the row's ownership, and moves the row's version.
Entity events come from the entity executor alone (403 ``event_append_denied``).
"""

from __future__ import annotations

from typing import Any

from asanoha.platform.errors import AccessDeniedError, Reasons
from asanoha.platform.model import EntityDef, EventDef, HandlerDef, Registry, SessionUser
from asanoha.platform.personal.events import seal_event_payload
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.service import gates, ownership
from asanoha.platform.service.event_metadata import event_metadata
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.request import Request
from asanoha.platform.service.validation import invalid_field, validate_payload
from asanoha.platform.store import (
    StoredEvent,
    Tables,
    append_event,
    apply_entity_event,
    stream_version,
)
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.declared_projections import apply_declared_projections
from asanoha.platform.store.projections import entity_of_event, lock_entity_row, stream_entity


class DomainEvents:
    """Appends declared domain events inside a write request."""

    def __init__(
        self,
        registry: Registry,
        tables: Tables,
        backend: Backend,
        personal: PersonalData,
        owner_rules: OwnerRules,
    ) -> None:
        self._registry = registry
        self._tables = tables
        self._backend = backend
        self._personal = personal
        self._owner_rules = owner_rules

    def append(
        self,
        request: Request,
        user: SessionUser,
        handler: HandlerDef,
        event: EventDef | str,
        payload: Any,
        *,
        stream_id: str,
        stream_type: str | None,
        expected_version: int | None,
    ) -> StoredEvent:
        """Append a declared domain event (see ``WriteContext.append_event``).

        A handler appends only its own feature's domain events; entity events come from the
        entity executor alone (403 ``event_append_denied``). On an entity's stream the event
        also moves the row's version, under the row's lock like every entity write.
        """
        qn = event.qn if isinstance(event, EventDef) else event
        gates.check_write_allowed(request, "append_event", qn)
        declared = self._registry.event(qn)
        if declared is None:
            raise LookupError(f"{handler.qn}: event {qn!r} is not declared; use feature.event(...)")
        if declared.feature != handler.feature or entity_of_event(self._registry, qn) is not None:
            raise AccessDeniedError(
                Reasons.EVENT_APPEND_DENIED, handler=handler.qn, event=qn, feature=handler.feature
            )
        if declared.model is not None:
            body = validate_payload(declared.model, payload, handler.qn).model_dump(mode="json")
        elif isinstance(payload, dict):
            body = payload
        else:
            raise invalid_field(handler.qn, "$", "dict_type", "an event payload is a JSON object")
        conn = request.conn
        if declared.pii != "none":
            # Values only: an optional personal field left empty stores nothing personal.
            carried = [name for name, value in body.items() if value is not None]
            gates.check_public_intake(request, declared.pii, carried, event=qn)
            body = seal_event_payload(
                self._personal.vault(conn), declared, user.tenant_id, stream_id, body
            )
        entity_def = stream_entity(conn, self._tables, self._registry, user.tenant_id, stream_id)
        self._check_stream_type(handler, entity_def, stream_id, stream_type)
        held = (user.tenant_id, stream_id)
        # A stream the handler fetched for writing is expected at the version it read.
        expected = request.held_versions.get(held) if expected_version is None else expected_version
        if entity_def is not None:
            # The stream is the entity's: the event takes its stream type (a rebuild replays
            # it), and the row lock comes first, as in the executor, so that concurrent
            # writers of the stream queue instead of deadlocking.
            stream_type = entity_def.key
            locked = lock_entity_row(conn, self._tables, entity_def, user.tenant_id, stream_id)
            ownership.check_stream_owned(
                conn, self._tables, self._owner_rules, entity_def, user, stream_id
            )
            if expected is None and locked is not None:
                expected = locked
        if expected is None:
            expected = stream_version(conn, self._tables, user.tenant_id, stream_id)
        stored = append_event(
            conn,
            self._backend,
            self._tables,
            tenant_id=user.tenant_id,
            stream_id=stream_id,
            stream_type=stream_type or declared.feature,
            expected_version=expected,
            type=qn,
            payload=body,
            metadata=event_metadata(request, user, handler.qn),
            created_by=user.id,
            schema_version=declared.schema_version,
        )
        if entity_def is not None:
            apply_entity_event(conn, self._tables, entity_def, stored)
        apply_declared_projections(conn, self._registry, stored)
        if held in request.held_versions:
            request.held_versions[held] = stored.version
        request.appended.append(stored)
        return stored

    def _check_stream_type(
        self,
        handler: HandlerDef,
        entity_def: EntityDef | None,
        stream_id: str,
        stream_type: str | None,
    ) -> None:
        """An entity's stream type is reserved for the streams its executor opened."""
        if stream_type is None:
            return
        if entity_def is not None and stream_type != entity_def.key:
            raise invalid_field(
                handler.qn,
                "stream_type",
                "entity_stream",
                f"stream {stream_id} belongs to entity {entity_def.key}; leave stream_type out",
            )
        if entity_def is None and self._registry.find_entity(stream_type) is not None:
            raise invalid_field(
                handler.qn,
                "stream_type",
                "entity_stream_type",
                f"{stream_type!r} is the stream type of an entity, whose streams only its "
                "executor opens; name a stream type of your own",
            )
