"""``RateLimit``: how often one caller (user, principal, tenant or address) may call a handler."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import limits

from asanoha.platform.errors import DefinitionError

RateScope = Literal["user", "tenant", "ip", "principal"]
_SCOPES = ("user", "tenant", "ip", "principal")


@dataclass(frozen=True)
class RateLimit:
    """``RateLimit("20/minute", per="user")`` on a handler: at most 20 calls a minute (a
    moving window) by each user; the next answers 429 ``rate_limited``.

    ``per``: ``user`` (tenant and user id), ``principal`` (the user id and, for an agent, its
    run: each agent run counts apart from its human), ``tenant``, or ``ip`` (the HTTP client's
    address; calls without one, from jobs and consumers, count per principal). The counts
    live in Redis; when it does not answer the call is refused (503
    ``rate_limit_unavailable``) unless ``fail_open=True`` admits it.
    """

    rate: str
    per: RateScope = "user"
    fail_open: bool = False

    def __post_init__(self) -> None:
        if self.per not in _SCOPES:
            raise DefinitionError(
                f"RateLimit({self.rate!r}): per= must be one of {list(_SCOPES)}, not {self.per!r}"
            )
        try:
            self.item  # noqa: B018 -- parsed once, so a wrong rate fails at definition time
        except (ValueError, TypeError):
            raise DefinitionError(
                f"RateLimit({self.rate!r}) is no rate; write it as '20/minute', '5/second' "
                "or '1000/day'"
            ) from None

    @functools.cached_property
    def item(self) -> limits.RateLimitItem:
        """The parsed rate."""
        return limits.parse(self.rate)
