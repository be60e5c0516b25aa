"""Idempotent writes: the first outcome of a write, kept under the caller's key and answered
again to every repeat.

A key belongs to one tenant, principal and handler (or the batch). The write's transaction
first holds the key (``hold``): a transaction lock on it (a Postgres advisory lock; SQLite
serialises writers anyway) and, in the same statement, the outcome stored under it. A repeat
of a committed write answers that outcome; a repeat while the first still runs waits for its
lock at most ``ASANOHA_IDEMPOTENCY_WAIT`` (then 409 ``idempotency_in_progress``) and then
answers the outcome the first committed. The first stores its outcome as its last statement
(``keep``), so a committed key always holds one and the fast path costs two statements. A 4xx
refusal rolls the write back and stores the refusal (in a transaction of its own at the top,
after a savepoint's rollback inside a job's or consumer's unit of work); a 5xx stores nothing,
so the repeat runs again.

The key is compared with a digest of the validated payload: the same key with another payload
is a client bug and answers 422 ``idempotency_key_reused``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, and_, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError

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
from asanoha.platform.model import SessionUser
from asanoha.platform.personal import redaction
from asanoha.platform.personal.vault import reveal, seal_known
from asanoha.platform.service.canonical import canonical_json
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.store import Tables
from asanoha.platform.store.backends import LOCK_NOT_AVAILABLE
from asanoha.platform.store.inserts import execute_insert, first_row

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
    """Whose key, for which handler, and the digest of what it was sent with: the validated
    payload and the access the caller held (see ``key_of``)."""

    tenant_id: str
    principal: str
    handler_qn: str
    key: str
    payload_digest: str
    #: The payload's whole digest: what keys kept by an earlier release were stored with
    #: (their access unknown, they are answered as then, until they expire).
    earlier_digest: str | None = None


def key_of(
    key: str | None,
    handler_qn: str,
    user: SessionUser,
    payload_digest: Callable[[], str],
    *,
    answer_once: str | None = None,
) -> IdempotencyKey | None:
    """The caller's key for a write of ``handler_qn`` (``None``: no key sent).

    A key belongs to the principal who sent it: an anonymous caller is nobody in particular,
    so its key would be shared with every other anonymous caller (who would be answered the
    first one's outcome); it is refused, 400 ``idempotency_key_anonymous``.

    The stored digest binds the payload and the caller's access (roles, and whether an agent
    acts): a repeat made with other roles (the same user after losing one) is refused rather
    than answered an outcome shaped for the access it no longer has. ``payload_digest`` is
    called only for a keyed write: a write without a key pays nothing.
    """
    if key is None:
        return None
    if user.is_anonymous:
        raise ValidationError(Reasons.IDEMPOTENCY_KEY_ANONYMOUS, handler=handler_qn)
    if answer_once is not None:
        # Its answer (a secret shown once) would be stored in plain text for every replay.
        raise ValidationError(Reasons.IDEMPOTENCY_KEY_NOT_KEPT, handler=handler_qn)
    payload = payload_digest()
    digest = payload[:_HALF] + _access_digest(user)[:_HALF]
    return IdempotencyKey(user.tenant_id, user.id, handler_qn, key, digest, payload)


#: A stored digest is half the payload's SHA-256, half the caller's access's (64 hex digits).
_HALF = 32


def _access_digest(user: SessionUser) -> str:
    return _digest_of_access(user.roles, user.is_agent)


@functools.lru_cache(maxsize=1024)
def _digest_of_access(roles: frozenset[str], is_agent: bool) -> str:
    # A keyed write pays for it once per set of roles, not on every call.
    return digest_of({"roles": sorted(roles), "agent": is_agent})


def _check_digest(stored: str, key: IdempotencyKey) -> None:
    """A repeat must carry the first call's payload (422 ``idempotency_key_reused``) and be
    made with its access (403 ``idempotency_key_other_access``)."""
    if stored in (key.payload_digest, key.earlier_digest):
        return
    if stored[:_HALF] != key.payload_digest[:_HALF]:
        raise UnprocessableError(
            Reasons.IDEMPOTENCY_KEY_REUSED, key=key.key, handler=key.handler_qn
        )
    raise AccessDeniedError(
        Reasons.IDEMPOTENCY_KEY_OTHER_ACCESS, key=key.key, handler=key.handler_qn
    )


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A write's answer as stored: its HTTP status and ``{"data": ...}`` or ``{"error": ...}``."""

    status: int
    body: dict[str, Any]

    @classmethod
    def of_result(
        cls,
        data: Any,
        reads: InstructionReads | None = None,
        linked: Iterable[tuple[str, str]] | None = None,
    ) -> Outcome:
        """The outcome of a write that succeeded with ``data`` (kept as plain JSON data).

        ``reads``: the instruction text the write handed out, kept with the outcome, so that
        a repeat's answer carries the same trust labels as the first (see ``note_reads``).
        ``linked``: the files the write showed with a signed link, ``(tenant, id)``, kept so
        that a repeat's answer carries links minted for it (see ``linked``), not the first
        call's, which expire.
        """
        body: dict[str, Any] = {"data": to_jsonable_python(data, serialize_unknown=True)}
        if reads is not None and reads.rows:
            body["reads"] = {
                entity: {row: sorted(names) for row, names in rows.items()}
                for entity, rows in reads.rows.items()
            }
        links = sorted({(str(tenant), str(file_id)) for tenant, file_id in linked or ()})
        if links:
            body["links"] = [list(pair) for pair in links]
        return cls(200, body)

    @property
    def linked(self) -> list[tuple[str, str]]:
        """The files the first call showed with a signed link, ``(tenant, id)``: a repeat
        mints their links again (``Files.relinked``)."""
        return [(str(tenant), str(file_id)) for tenant, file_id in self.body.get("links", [])]

    def note_reads(self, reads: InstructionReads | None) -> None:
        """Add the instruction text the first call handed out to ``reads`` (a repeat's)."""
        if reads is None:
            return
        for entity, rows in self.body.get("reads", {}).items():
            by_row = reads.rows.setdefault(entity, {})
            for row, names in rows.items():
                by_row.setdefault(row, set()).update(names)

    @classmethod
    def of_error(cls, error: AsanohaError) -> Outcome:
        """The outcome of a refusal; its details become plain JSON data. Inside a job or a
        consumer, the personal values it revealed read as ``[personal]`` in them (see
        ``personal.redaction``)."""
        details = to_jsonable_python(error.details, serialize_unknown=True)
        body = {
            "code": error.code,
            "reason": str(error.reason),
            "message": redaction.redact(error.message),
            "details": redaction.redact_json(details),
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


def hold(
    conn: Connection, tables: Tables, key: IdempotencyKey, wait_seconds: float = 10.0
) -> Outcome | None:
    """Hold ``key`` until ``conn``'s transaction ends and return the outcome stored under
    it (``None``: none; run the write, then ``keep`` its outcome).

    A request that holds the key is waited for at most ``wait_seconds``: then 409
    ``idempotency_in_progress``. Raises 422 ``idempotency_key_reused`` when the stored
    outcome was for another payload.
    """
    if conn.dialect.name == "postgresql":
        space, lock = _lock_ids(key)
        sql = _hold_sql(tables.idempotency.name)
        parameters = {
            "space": space,
            "lock": lock,
            "tenant": key.tenant_id,
            "principal": key.principal,
            "handler": key.handler_qn,
            "key": key.key,
        }
        # Every keyed write sends it inside its transaction (the lock is the transaction's):
        # on the driver's cursor, without a result object.
        held = first_row(conn, sql, parameters)
        assert held is not None  # a LEFT JOIN from one row answers one row
        found: Any = _Held(*held)
        if not found.locked:
            _wait_for(conn, space, lock, wait_seconds, key)
            found = _find(conn, tables, key)
    else:
        found = _find(conn, tables, key)
    if found is None or found.status is None:
        return None
    if found.expires_at <= dt.datetime.now(dt.UTC):
        return None  # kept past its time and not pruned yet: as good as gone
    _check_digest(found.payload_digest, key)
    return Outcome(found.status, dict(reveal(conn, found.body)))


def keep(
    conn: Connection, tables: Tables, key: IdempotencyKey, outcome: Outcome, ttl_seconds: float
) -> bool:
    """Store ``outcome`` under ``key`` in ``conn``'s transaction (replacing an expired one);
    ``False`` when a live outcome was committed under it meanwhile: the caller undoes its
    write and answers that one (``hold`` again)."""
    table = tables.idempotency
    now = dt.datetime.now(dt.UTC)
    row = {
        "tenant_id": key.tenant_id,
        "principal": key.principal,
        "handler_qn": key.handler_qn,
        "key": key.key,
        "payload_digest": key.payload_digest,
        "status": outcome.status,
        "body": seal_known(conn, outcome.body),
        "created_at": now,
        "expires_at": now + dt.timedelta(seconds=ttl_seconds),
    }
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert

    def build() -> Any:
        statement = insert(table)
        return statement.on_conflict_do_update(
            index_elements=list(table.primary_key),
            set_={name: statement.excluded[name] for name in KEPT_COLUMNS},
            # Only an expired outcome gives way (the new row's created_at is now).
            where=table.c.expires_at <= statement.excluded.created_at,
        ).returning(table.c.key)

    return execute_insert(conn, table, row, kind="keep_outcome", build=build) is not None


class _Held(NamedTuple):
    """The row ``_hold_sql`` answers."""

    locked: bool
    status: int | None
    body: Any
    payload_digest: str | None
    expires_at: dt.datetime | None


@functools.cache
def _hold_sql(table: str) -> str:
    """Take the key's lock (without waiting) and read its outcome, in one statement."""
    return (
        "SELECT pg_try_advisory_xact_lock(%(space)s, %(lock)s) AS locked, i.status, i.body, "
        f"i.payload_digest, i.expires_at FROM (SELECT 1) AS one LEFT JOIN {table} AS i "
        "ON i.tenant_id = %(tenant)s AND i.principal = %(principal)s "
        "AND i.handler_qn = %(handler)s AND i.key = %(key)s"
    )


#: What a kept outcome replaces on an expired row of the same key.
KEPT_COLUMNS = ("payload_digest", "status", "body", "created_at", "expires_at")
#: The first key of the idempotency locks (advisory locks of two keys): apart from the
#: job-concurrency locks, which take one key (a separate key space).
LOCK_SPACE = 0x1D3


def _lock_ids(key: IdempotencyKey) -> tuple[int, int]:
    text = "\x1f".join((key.tenant_id, key.principal, key.handler_qn, key.key))
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big", signed=True)
    return LOCK_SPACE, value


def _wait_for(conn: Connection, space: int, lock: int, seconds: float, key: IdempotencyKey) -> None:
    """Wait for the request that holds ``key`` to end, at most ``seconds``; in a savepoint,
    so that a timeout leaves an enclosing transaction usable."""
    savepoint = conn.begin_nested()
    try:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{max(1, int(seconds * 1000))}ms'")
        conn.execute(select(func.pg_advisory_xact_lock(space, lock)))
        conn.exec_driver_sql("SET LOCAL lock_timeout = DEFAULT")
    except DBAPIError as error:
        savepoint.rollback()
        if getattr(error.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise ConflictError(
                Reasons.IDEMPOTENCY_IN_PROGRESS, key=key.key, handler=key.handler_qn
            ) from None
        raise
    savepoint.commit()


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
