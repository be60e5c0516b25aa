"""Event ages: ``keep_for="365d"`` on an event type, and ``--older-than`` of ``asanoha events
prune``."""

from __future__ import annotations

import datetime as dt
import re

_AGE = re.compile(r"^(\d+)([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_age(text: str | dt.timedelta) -> dt.timedelta:
    """``365d``, ``12h`` or ``30m`` (or a positive ``timedelta``) as a duration;
    ``ValueError`` saying how to write one otherwise."""
    if isinstance(text, dt.timedelta):
        if text <= dt.timedelta(0):
            raise ValueError(f"{text!r} is no age: it must be positive")
        return text
    found = _AGE.match(str(text).strip())
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"{text!r} is no age: write a count and d, h or m (e.g. 365d)")
    return dt.timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})
