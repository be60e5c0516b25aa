"""Where a caller is: the locale and time zone it asked for.

A request asks through ``Accept-Language`` (the locale) and its token's claims ``locale`` and
``zoneinfo`` (the OpenID Connect names); a job carries what the write that enqueued it asked
for in its headers. What is not asked falls back to the tenant's configuration (see
``service/feature_context``).
"""

from __future__ import annotations

import dataclasses
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asanoha.platform.model.users import SessionUser

_TAG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")


def language_tag(value: Any) -> str | None:
    """``value`` as a language tag (``de-AT``: the language lower-case), else ``None``."""
    if not isinstance(value, str) or not _TAG.match(value.strip()):
        return None
    language, _, rest = value.strip().partition("-")
    return f"{language.lower()}-{rest}" if rest else language.lower()


def zone_name(value: Any) -> str | None:
    """``value`` if it names a known IANA time zone, else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
    return value


def preferred_language(accept_language: str | None) -> str | None:
    """The language tag an ``Accept-Language`` header prefers (highest ``q``, first on a
    tie; ``*`` and malformed entries ignored), else ``None``."""
    if not accept_language:
        return None
    best: tuple[float, int, str] | None = None
    for index, part in enumerate(accept_language.split(",")[:20]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                quality = float(params[2:])
            except ValueError:
                continue
        checked = language_tag(tag)
        if checked is None or quality <= 0:
            continue
        if best is None or quality > best[0]:
            best = (quality, index, checked)
    return None if best is None else best[2]


@dataclass(frozen=True)
class Place:
    """The locale and time zone a caller asked for (``None``: not asked)."""

    locale: str | None = None
    tz: str | None = None

    def to_header(self) -> dict[str, str | None]:
        """A JSON object for job headers."""
        return {"locale": self.locale, "tz": self.tz}

    @classmethod
    def from_header(cls, value: Any) -> Place:
        """Read ``to_header``'s object back; anything else asks for nothing."""
        if not isinstance(value, dict):
            return cls()
        return cls(language_tag(value.get("locale")), zone_name(value.get("tz")))


def with_place_claims(user: SessionUser, claims: Mapping[str, Any]) -> SessionUser:
    """``user`` with the locale and time zone its token's claims ``locale`` and ``zoneinfo``
    name; a claim that names no valid tag or zone is left out (an identity provider's
    profile value, not the caller's request)."""
    locale, zone = language_tag(claims.get("locale")), zone_name(claims.get("zoneinfo"))
    if locale is None and zone is None:
        return user
    return dataclasses.replace(user, locale=locale, zoneinfo=zone)
