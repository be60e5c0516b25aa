"""Rate limits of handlers and of uploads, counted in Redis through the ``limits`` library.

Counted after admission (the handler exists, admits the caller, accepts the payload) and
before anything else, so a refused call writes nothing. The counts are shared by every
process of the application (never process memory), in a moving window per handler and
caller; the keys carry the application's queue prefix, so applications can share a server.
Uploads (``POST /api/files``, ``Files.upload``) are counted the same way under their own
name, ``UPLOADS``, before their body is read (``ASANOHA_FILE_UPLOAD_RATE``).
"""

from __future__ import annotations

import logging
import math
import time

from asanoha.platform.errors import RateLimitError, Reasons, ServiceUnavailableError
from asanoha.platform.model import HandlerDef, SessionUser
from asanoha.platform.model.rate_limit import RateLimit
from asanoha.platform.model.users import SYSTEM_ROLE, SYSTEM_USER_ID
from asanoha.platform.service.request import RequestMeta

log = logging.getLogger("asanoha.service")

#: Seconds a rate-limited job attempt waits when Redis does not answer.
UNAVAILABLE_WAIT = 5.0
#: What uploads are counted under, and what their refusals name as ``details.handler``.
UPLOADS = "POST /api/files"


class RateLimiter:
    """Counts calls of rate-limited handlers in the Redis at ``url``."""

    def __init__(
        self,
        url: str,
        namespace: str,
        default: RateLimit | None = None,
        *,
        uploads: RateLimit | None = None,
    ) -> None:
        self._namespace = namespace
        #: The limit of handlers that declare none (``ASANOHA_RATE_LIMIT_DEFAULT``).
        self.default = default
        #: The limit of uploads (``ASANOHA_FILE_UPLOAD_RATE``; ``None``: the default's).
        self.uploads = uploads
        # limits is imported by a limiter only (it brings asyncio and its storages): an
        # application without rate limits, and every command, does without it.
        from limits.storage import storage_from_string
        from limits.strategies import MovingWindowRateLimiter

        # wrap_exceptions: a Redis that does not answer raises StorageError, whatever the
        # client library's own exception.
        storage = storage_from_string(url, wrap_exceptions=True)
        self._strategy = MovingWindowRateLimiter(storage)

    def check(self, handler: HandlerDef, user: SessionUser, meta: RequestMeta | None) -> None:
        """Count one call of ``handler`` by ``user``; ``RateLimitError`` (429) when it is one
        too many, ``ServiceUnavailableError`` (503) when Redis does not answer."""
        limit = self.limit_of(handler, user)
        if limit is not None:
            self._count(handler.qn, limit, user, meta)

    def check_upload(self, user: SessionUser, meta: RequestMeta | None) -> None:
        """Count one upload by ``user`` as ``check`` counts a call (429, 503), under
        ``UPLOADS``."""
        limit = self.upload_limit_of(user)
        if limit is not None:
            self._count(UPLOADS, limit, user, meta)

    def _count(
        self, counted: str, limit: RateLimit, user: SessionUser, meta: RequestMeta | None
    ) -> None:
        from limits.errors import StorageError

        item = limit.item
        key = (self._namespace, counted, *scope_of(limit, user, meta))
        try:
            allowed = self._strategy.hit(item, *key)
            stats = None if allowed else self._strategy.get_window_stats(item, *key)
        except (StorageError, OSError) as error:
            if limit.fail_open:
                log.warning("rate limit of %s not counted (%s); admitted", counted, error)
                return
            raise ServiceUnavailableError(Reasons.RATE_LIMIT_UNAVAILABLE, handler=counted) from None
        if stats is None:
            return
        retry_after = max(1, math.ceil(stats.reset_time - time.time()))
        raise RateLimitError(
            handler=counted,
            limit=item.amount,
            window_seconds=item.get_expiry(),
            remaining=stats.remaining,
            retry_after=retry_after,
            per=limit.per,
        )

    def wait_for_job(
        self, job_qn: str, limit: RateLimit, tenant_id: str, triggered_by: str | None
    ) -> float:
        """Count one attempt of the job ``job_qn``; return 0 when it may run, else the
        seconds until its limit's window has room. A Redis that does not answer makes it
        wait ``UNAVAILABLE_WAIT`` seconds (it never fails the job), unless ``fail_open``."""
        from limits.errors import StorageError

        item = limit.item
        scope = ("tenant", tenant_id) if limit.per == "tenant" else (
            "principal", tenant_id, triggered_by or "")  # fmt: skip
        key = (self._namespace, job_qn, *scope)
        try:
            if self._strategy.hit(item, *key):
                return 0.0
            stats = self._strategy.get_window_stats(item, *key)
        except (StorageError, OSError) as error:
            if limit.fail_open:
                log.warning("rate limit of %s not counted (%s); admitted", job_qn, error)
                return 0.0
            log.warning("rate limit of %s not counted (%s); the attempt waits", job_qn, error)
            return UNAVAILABLE_WAIT
        return max(0.1, stats.reset_time - time.time())

    def limit_of(self, handler: HandlerDef, user: SessionUser) -> RateLimit | None:
        """The limit counted for a call of ``handler`` by ``user``: its own, else the
        default, unless it declared ``rate_limit=None, reason=...`` (deliberately unlimited).

        The default leaves out the tenant's system user (jobs' and consumers' ``ctx.write``):
        it guards a handler against its callers, and a job's fan-out of writes would fail
        on it; a limit the handler declares counts those calls too.
        """
        if handler.rate_limit is not None or handler.rate_limit_reason is not None:
            return handler.rate_limit
        if _is_system(user):
            return None
        return self.default

    def upload_limit_of(self, user: SessionUser) -> RateLimit | None:
        """The limit counted for an upload by ``user``: ``uploads``, else the default
        (which, as for handlers, leaves out the tenant's system user)."""
        if self.uploads is not None:
            return self.uploads
        return None if _is_system(user) else self.default


def _is_system(user: SessionUser) -> bool:
    return user.id == SYSTEM_USER_ID and user.roles == {SYSTEM_ROLE}


def scope_of(limit: RateLimit, user: SessionUser, meta: RequestMeta | None) -> tuple[str, ...]:
    """Whose calls count together under ``limit``."""
    if limit.per == "tenant":
        return ("tenant", user.tenant_id)
    if limit.per == "ip" and meta is not None and meta.client_ip:
        return ("ip", meta.client_ip)
    if limit.per == "user":
        return ("user", user.tenant_id, user.id)
    # principal, and ip without an address (jobs, consumers): the acting principal.
    return ("principal", user.tenant_id, user.id, user.agent or "")
