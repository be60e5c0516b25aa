"""Server-Sent Events on the wire (the WHATWG ``text/event-stream`` format)."""

from __future__ import annotations

import json
from typing import Any

#: Milliseconds a browser's ``EventSource`` waits before it reconnects (sent first).
RETRY_MS = 1000
#: A comment line (``EventSource`` ignores it) that keeps an idle connection open.
HEARTBEAT = b": ping\n\n"


def event_message(event_id: int, data: bytes) -> bytes:
    """One event: ``id:`` its global position, ``data:`` its JSON (one line)."""
    return b"id: %d\ndata: %s\n\n" % (event_id, data)


def control_message(name: str, body: dict[str, Any]) -> bytes:
    """A named message that is no event (``overflow``, ``reauth``); ``EventSource`` hands it
    to listeners of ``name``, not to ``onmessage``."""
    return f"event: {name}\ndata: {json.dumps(body)}\n\n".encode()


def retry_message(milliseconds: int = RETRY_MS) -> bytes:
    """How long the client waits before it reconnects."""
    return f"retry: {milliseconds}\n\n".encode()
