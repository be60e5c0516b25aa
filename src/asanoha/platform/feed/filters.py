"""What a feed client asks for: event-type patterns and, optionally, stream ids."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from asanoha.platform.service.validation import invalid_field

#: What the feed answers as in errors (it is no handler).
FEED = "feed"
#: At most this many patterns and stream ids per subscription (a POST body carries long lists).
MAX_TERMS = 500


@dataclass(frozen=True)
class FeedFilter:
    """Event types matching any of ``types`` (shell-style patterns such as
    ``crm:event:ticket.*``; none: every type), of the ``streams`` named (none: every
    stream)."""

    types: tuple[str, ...] = ()
    streams: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, types: Iterable[str], streams: Iterable[str]) -> FeedFilter:
        """A filter from request values (comma-separated items are split); a blank or
        over-long list is a ``ValidationError`` naming the parameter."""
        patterns = tuple(_split(types, "types"))
        ids = frozenset(_split(streams, "stream"))
        return cls(patterns, ids)

    def matches_type(self, event_type: str) -> bool:
        """Whether events of ``event_type`` are asked for."""
        return not self.types or any(fnmatch.fnmatchcase(event_type, p) for p in self.types)

    def matches(self, event_type: str, stream_id: str) -> bool:
        """Whether an event of ``event_type`` on ``stream_id`` is asked for."""
        return (not self.streams or stream_id in self.streams) and self.matches_type(event_type)

    def types_among(self, known: Sequence[str]) -> list[str]:
        """The types of ``known`` this filter asks for (to narrow a database read)."""
        return [name for name in known if self.matches_type(name)]


def _split(values: Iterable[str], name: str) -> list[str]:
    found: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                raise invalid_field(FEED, name, "value_error", f"{name}: an empty item")
            found.append(item)
    if len(found) > MAX_TERMS:
        raise invalid_field(FEED, name, "too_long", f"{name}: at most {MAX_TERMS} items")
    return found
