"""``RateLimit``: how often one caller (user, principal, tenant or address) may call a handler."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import Access

if TYPE_CHECKING:
    import limits

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
        # Imported with the first rate declared: limits brings asyncio and its storages,
        # which an application without rate limits (and every command) would load for nothing.
        import limits

        return limits.parse(self.rate)


def check_rate_limit_declaration(
    qn: str, access: Access, limit: RateLimit | None, reason: str | None
) -> None:
    """Refuse a handler that admits anonymous callers (``Access(public=...)``) without a
    rate limit or a reason for having none, and a ``reason`` beside a limit."""
    if limit is not None and not isinstance(limit, RateLimit):
        raise DefinitionError(f"{qn}: rate_limit= takes RateLimit('20/minute', per=...)")
    if reason is not None:
        if limit is not None:
            raise DefinitionError(
                f"{qn}: reason= explains rate_limit=None (why the handler has no limit); "
                "drop it beside a RateLimit"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise DefinitionError(f"{qn}: rate_limit=None needs a non-blank reason='...'")
    if access.public is not None and limit is None and reason is None:
        raise DefinitionError(
            f"{qn} admits anonymous callers (Access(public=...)) but declares no rate limit; "
            "pass rate_limit=RateLimit('20/minute', per='ip'), or rate_limit=None, "
            "reason='<why anyone may call it without limit>'"
        )
