"""Idempotent writes: the first outcome of a write, kept under the caller's key and answered
again to every repeat.

A key belongs to one tenant, principal and handler (or the batch). Its row is inserted before
the write runs, in the write's own transaction: a concurrent repeat inserts the same primary
key and so waits until the first commits (then it reads and answers the stored outcome) or
rolls back (then it runs the write itself). The outcome is set in the same transaction, so a
committed row always holds one. A 4xx refusal rolls the write back to a savepoint taken after
the key row and stores the refusal in that transaction; a 5xx rolls everything back and stores
nothing, so the repeat runs again.

The key is compared with a digest of the validated payload: the same key with another payload
is a client bug and answers 422 ``idempotency_key_reused``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, and_, delete, select, update

from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitError,
    Reasons,
    UnprocessableError,
    ValidationError,
    VersionConflictError,
)
from asanoha.platform.service.approvals import canonical_json
from asanoha.platform.store import Tables
from asanoha.platform.store.backends import Backend, LockWaitTimeout

#: The longest key a caller may send.
MAX_KEY_LENGTH = 255
#: The HTTP header and the MCP ``_meta`` entry that carry a key.
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_META_KEY = "asanoha.dev/idempotencyKey"
#: The ``_meta`` entry that marks a tool result as the stored outcome of an earlier call.
IDEMPOTENT_REPLAYED_META_KEY = "asanoha.dev/idempotentReplayed"
#: The header that marks an answer as the stored outcome of an earlier request.
REPLAYED_HEADER = "Idempotent-Replayed"
#: The handler name a batch's keys are kept under.
BATCH_SCOPE = "batch"
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]+")
# The classes a stored refusal is answered with again, by code (a subclass before its base).
_ERROR_CLASSES: tuple[type[AsanohaError], ...] = (
    ValidationError,
    AuthenticationError,
    AccessDeniedError,
    NotFoundError,
    VersionConflictError,
    ConflictError,
    PayloadTooLargeError,
    UnprocessableError,
    RateLimitError,
)


def digest_of(value: Any) -> str:
    """The SHA-256 of ``value`` as canonical JSON: what a repeat's payload is compared by."""
    plain = to_jsonable_python(value, serialize_unknown=True)
    return hashlib.sha256(canonical_json(plain).encode()).hexdigest()


def check_key(key: Any) -> str:
    """``key`` if a caller may use it: 1 to 255 printable ASCII characters; else 400
    ``idempotency_key_invalid``."""
    if not isinstance(key, str):
        raise ValidationError(Reasons.IDEMPOTENCY_KEY_INVALID, error="the key is not a string")
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValidationError(
            Reasons.IDEMPOTENCY_KEY_INVALID,
            error=f"the key has {len(key)} characters, not 1 to {MAX_KEY_LENGTH}",
        )
    if _PRINTABLE_ASCII.fullmatch(key) is None:
        raise ValidationError(
            Reasons.IDEMPOTENCY_KEY_INVALID,
            error="the key holds a character that is not printable ASCII",
        )
    return key


@dataclasses.dataclass(frozen=True)
class IdempotencyKey:
    """Whose key, for which handler, and the digest of the validated payload it was sent with."""

    tenant_id: str
    principal: str
    handler_qn: str
    key: str
    payload_digest: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A write's answer as stored: its HTTP status and ``{"data": ...}`` or ``{"error": ...}``."""

    status: int
    body: dict[str, Any]

    @classmethod
    def of_result(cls, data: Any) -> Outcome:
        """The outcome of a write that succeeded with ``data`` (plain JSON data)."""
        return cls(200, {"data": to_jsonable_python(data, serialize_unknown=True)})

    @classmethod
    def of_error(cls, error: AsanohaError) -> Outcome:
        """The outcome of a refusal; its details become plain JSON data."""
        body = {
            "code": error.code,
            "reason": str(error.reason),
            "message": error.message,
            "details": to_jsonable_python(error.details, serialize_unknown=True),
        }
        return cls(error.http_status, {"error": body})

    def answer(self) -> Any:
        """The stored data, or the stored refusal raised again."""
        if "error" not in self.body:
            return self.body.get("data")
        stored = self.body["error"]
        raise _error_of(self.status, stored)


def is_storable(error: BaseException) -> bool:
    """Whether ``error`` is an outcome to keep: a refusal (4xx), never a failure (5xx).

    A refusal for a missing or spent approval token is not kept either: it depends on the
    token, which the digest does not cover, and the agent is told to call again with one;
    nor is a rate limit's 429, which says to try again later.
    """
    return (
        isinstance(error, AsanohaError)
        and 400 <= error.http_status < 500
        and error.http_status != 429
        and not str(error.reason).startswith("agent.approval")
    )


@dataclasses.dataclass
class Replay:
    """Filled in by the dispatch: whether the answer is a stored outcome (for the
    ``Idempotent-Replayed`` header)."""

    replayed: bool = False


def claim(
    conn: Connection,
    backend: Backend,
    tables: Tables,
    key: IdempotencyKey,
    ttl_seconds: float,
    wait_seconds: float = 10.0,
) -> Outcome | None:
    """Take ``key`` for a write in ``conn``'s transaction, or find its stored outcome.

    ``None``: this transaction holds the key and runs the write (then ``record``). An
    ``Outcome``: an earlier request committed it. A stored outcome is read before anything is
    inserted, so a repeat writes nothing. Raises 422 ``idempotency_key_reused`` when the
    key was used with another payload.
    """
    table = tables.idempotency
    now = dt.datetime.now(dt.UTC)
    found = _find(conn, tables, key)
    if found is not None and found.expires_at <= now:
        # Kept past its time and not pruned yet: as good as gone.
        conn.execute(delete(table).where(_matches(tables, key), table.c.expires_at <= now))
        found = None
    if found is None:
        row = {
            "tenant_id": key.tenant_id,
            "principal": key.principal,
            "handler_qn": key.handler_qn,
            "key": key.key,
            "payload_digest": key.payload_digest,
            "status": None,
            "body": None,
            "created_at": now,
            "expires_at": now + dt.timedelta(seconds=ttl_seconds),
        }
        # On a key another transaction inserted and has not ended, this waits for its end,
        # at most ``wait_seconds``.
        try:
            if backend.insert_waiting_at_most(conn, table, row, wait_seconds) is not None:
                return None
        except LockWaitTimeout:
            raise ConflictError(
                Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn
            ) from None
        found = _find(conn, tables, key)
        if found is None or found.status is None:
            # Only a writer that has not committed holds an outcome-less row; one that
            # committed and was pruned at once leaves nothing. Either way: ask again later.
            raise ConflictError(
                Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn
            )
    if found.payload_digest != key.payload_digest:
        raise UnprocessableError(
            Reasons.IDEMPOTENCY_KEY_REUSED, key=key.key, handler=key.handler_qn
        )
    if found.status is None:
        raise ConflictError(Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn)
    return Outcome(found.status, dict(found.body))


def record(conn: Connection, tables: Tables, key: IdempotencyKey, outcome: Outcome) -> None:
    """Store ``outcome`` on the key row this transaction claimed."""
    table = tables.idempotency
    conn.execute(
        update(table).where(_matches(tables, key)).values(status=outcome.status, body=outcome.body)
    )


def prune_expired(conn: Connection, tables: Tables) -> int:
    """Delete the keys kept past ``ASANOHA_IDEMPOTENCY_TTL``; return how many went."""
    table = tables.idempotency
    result = conn.execute(delete(table).where(table.c.expires_at <= dt.datetime.now(dt.UTC)))
    return int(result.rowcount or 0)


def _matches(tables: Tables, key: IdempotencyKey) -> Any:
    table = tables.idempotency
    return and_(
        table.c.tenant_id == key.tenant_id,
        table.c.principal == key.principal,
        table.c.handler_qn == key.handler_qn,
        table.c.key == key.key,
    )


def _find(conn: Connection, tables: Tables, key: IdempotencyKey) -> Any:
    table = tables.idempotency
    return conn.execute(select(table).where(_matches(tables, key))).first()


def _error_of(status: int, stored: dict[str, Any]) -> AsanohaError:
    code = stored.get("code")
    kind = next(
        (c for c in _ERROR_CLASSES if c.code == code and c.http_status == status),
        UnprocessableError,
    )
    try:
        reason: Reasons | None = Reasons(str(stored.get("reason")))
    except ValueError:
        reason = None  # a reason this version no longer has: the class's own
    return kind(reason, stored.get("message"), **stored.get("details", {}))
