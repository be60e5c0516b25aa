"""Located timestamps: an instant with the zone it happened in.

The API takes ``{"at": "2026-03-29T09:30:00", "tz": "Europe/Berlin"}`` (the wall-clock time
in that zone; an offset in ``at`` is converted to the zone) and answers
``{"at": "2026-03-29T09:30:00", "tz": "Europe/Berlin", "utc": "2026-03-29T07:30:00+00:00"}``:
the local time a person saw and the instant, each exact. A wall-clock time the zone skips
(a daylight-saving gap) is refused; one it repeats (the hour that is lived twice) means its
first occurrence.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Any, TypedDict


class LocatedValue(TypedDict):
    """A located timestamp as the API carries it and the column stores it."""

    at: str
    tz: str
    utc: str


def parse_located(value: Any) -> LocatedValue:
    """``value`` checked and completed with its ``utc`` instant; ``ValueError`` saying
    what is wrong. A given ``utc`` is recomputed (it follows from ``at`` and ``tz``)."""
    if not isinstance(value, dict) or not {"at", "tz"} <= set(value) <= {"at", "tz", "utc"}:
        raise ValueError('give a located timestamp as {"at": "<local time>", "tz": "<zone>"}')
    at, tz = value["at"], value["tz"]
    try:
        zone = zoneinfo.ZoneInfo(tz) if isinstance(tz, str) and tz == tz.strip() else None
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = None
    if zone is None:
        raise ValueError(f"{tz!r} is no IANA time zone (e.g. 'Europe/Berlin', 'UTC')")
    if not isinstance(at, str):
        raise ValueError("give 'at' as ISO 8601 text")
    try:
        parsed = dt.datetime.fromisoformat(at)
    except ValueError:
        raise ValueError(f"'at' {at!r} is no ISO 8601 date and time") from None
    # A given offset names the instant; the zone's wall-clock time for it is kept.
    local = parsed if parsed.tzinfo is None else parsed.astimezone(zone).replace(tzinfo=None)
    instant = local.replace(tzinfo=zone, fold=0).astimezone(dt.UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != local:
        raise ValueError(f"{local.isoformat()} does not exist in {tz} (a daylight-saving gap)")
    return {"at": local.isoformat(), "tz": tz, "utc": instant.isoformat()}


def instant_of(value: LocatedValue) -> dt.datetime:
    """The instant of a canonical value, for comparing it with a bound."""
    return dt.datetime.fromisoformat(value["utc"])


#: The JSON schema of a located timestamp (OpenAPI, MCP tools).
LOCATED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "at": {
            "type": "string",
            "description": "the wall-clock time in tz (ISO 8601; an offset is converted)",
        },
        "tz": {"type": "string", "x-format": "iana-time-zone"},
        "utc": {"type": "string", "format": "date-time", "readOnly": True},
    },
    "required": ["at", "tz"],
    "additionalProperties": False,
}
