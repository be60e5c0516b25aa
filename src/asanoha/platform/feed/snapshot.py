"""What a stream handler makes of the newest events, read once: its MCP resource.

A stream handler is a live feed (``/api/stream/<qn>``); an agent reads it as a resource
instead, ``asanoha://stream/<qn>``: the messages the handler makes of the newest events of
its types that the caller may see, oldest first, with the same access rules as the feed
(tenant, read rule, row ownership, hidden fields, personal values).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from asanoha.platform.feed.access import FeedAccess
from asanoha.platform.feed.context import StreamContext
from asanoha.platform.feed.filters import FeedFilter
from asanoha.platform.feed.reader import FeedReader
from asanoha.platform.model import SessionUser
from asanoha.platform.model.handlers import StreamHandlerDef
from asanoha.platform.store import Database, Tables

#: The scheme of a stream handler's resource: ``asanoha://stream/<qn>``.
RESOURCE_PREFIX = "asanoha://stream/"
#: How many of the newest events a resource read looks at.
SNAPSHOT_EVENTS = 100

log = logging.getLogger("asanoha.feed")


def resource_uri(handler: StreamHandlerDef) -> str:
    """The resource of ``handler``."""
    return RESOURCE_PREFIX + handler.qn


def handler_qn_of(uri: str) -> str | None:
    """The stream handler a resource URI names (``None``: no stream resource)."""
    return uri[len(RESOURCE_PREFIX) :] if uri.startswith(RESOURCE_PREFIX) else None


def recent_messages(
    database: Database,
    tables: Tables,
    reader: FeedReader,
    access: FeedAccess,
    handler: StreamHandlerDef,
    user: SessionUser,
    *,
    events: int = SNAPSHOT_EVENTS,
) -> list[Any]:
    """What ``handler`` makes for ``user`` of the newest ``events`` events of its types in
    the user's tenant, oldest first (events the user may not see, and those it makes
    nothing of, give no message)."""
    types = FeedFilter(handler.on, frozenset()).types_among(reader.types)
    if not types:
        return []
    table = tables.events
    with database.connect() as conn:
        newest = (
            conn.execute(
                select(table.c.id)
                .where(table.c.type.in_(types), table.c.tenant_id == user.tenant_id)
                .order_by(table.c.id.desc())
                .limit(events)
            )
            .scalars()
            .all()
        )
    if not newest:
        return []
    items = reader.read_range(user.tenant_id, min(newest) - 1, max(newest), types, events)
    context = StreamContext(user)
    messages: list[Any] = []
    for item in items:
        if not access.visible(item, user):
            continue
        try:
            made = handler.func(access.shown(item, user), context)
        except Exception:
            log.warning(
                "stream handler %s failed on event %d", handler.qn, item.event.id, exc_info=True
            )
            continue
        if made is not None:
            messages.append(made)
    return messages
