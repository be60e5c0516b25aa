"""Personal access tokens: long-lived, scoped bearer tokens for scripts, CI jobs and agents.

A token is ``asanoha_pat_<secret>``; only the SHA-256 of it is stored, so the table leaks
no usable token. Each row names its user, tenant, roles and QN-pattern scopes; a token
made for an agent carries the agent claim from its row, so it can never approve. Never
the ``system`` role. A token's ``jti`` is its row id: revoking it marks the row and adds a
revocation, which every process sees within the revocations' cache time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import uuid
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table, insert, select, update

from asanoha.platform.errors import AuthenticationError, Reasons
from asanoha.platform.identity.claims import IDENTIFIER, SYSTEM_ROLE_REFUSED, refused
from asanoha.platform.identity.revocations import RevocationList
from asanoha.platform.model import SYSTEM_ROLE, SessionUser
from asanoha.platform.model.scopes import parse_scopes
from asanoha.platform.store import Database

#: The prefix of every personal access token: a secret scanner (or a person) recognises one.
ACCESS_TOKEN_PREFIX = "asanoha_pat_"
#: The longest lifetime of a personal access token.
MAX_ACCESS_TOKEN_DAYS = 366


class AccessTokenError(ValueError):
    """A personal access token that may not be created (names the option to fix)."""


def digest(token: str) -> str:
    """What the table stores of ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


def parse_lifetime(text: str) -> dt.timedelta:
    """``90d``, ``12h``, ``30m`` or seconds; raises ``AccessTokenError`` past a year."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    text = text.strip()
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    if not number.isdigit() or int(number) < 1:
        raise AccessTokenError(
            f"--expires {text!r}: write a number of days, hours or minutes such as 90d, 12h or 30m"
        )
    lifetime = dt.timedelta(seconds=int(number) * units[unit])
    if lifetime > dt.timedelta(days=MAX_ACCESS_TOKEN_DAYS):
        raise AccessTokenError(
            f"--expires {text!r}: a token may live at most {MAX_ACCESS_TOKEN_DAYS} days"
        )
    return lifetime


@dataclass(frozen=True)
class NewAccessToken:
    """A token just created: ``token`` is shown once and never again."""

    token: str
    row: dict[str, Any]


class AccessTokenStore:
    """The personal access tokens of one database."""

    def __init__(
        self,
        database: Database | None,
        table: Table,
        revocations: RevocationList,
    ) -> None:
        self._database = database
        self._table = table
        self._revocations = revocations

    def create(
        self,
        *,
        tenant_id: str,
        user_id: str,
        name: str,
        scopes: str | Iterable[str],
        lifetime: dt.timedelta,
        created_by: str,
        roles: Iterable[str] | None = (),
        agent: str | None = None,
        conn: Connection | None = None,
    ) -> NewAccessToken:
        """A new token; raises ``AccessTokenError`` for the ``system`` role, bad scopes, a
        malformed id or a lifetime past ``MAX_ACCESS_TOKEN_DAYS``."""
        # ``None``: an operator's token whose scopes are its grant (stored as JSON null).
        role_list = sorted(set(roles)) if roles is not None else []
        if SYSTEM_ROLE in role_list:
            raise AccessTokenError(SYSTEM_ROLE_REFUSED)
        for value, what in (
            (tenant_id, "tenant"),
            (user_id, "user"),
            *((r, "role") for r in role_list),
        ):
            if not IDENTIFIER.fullmatch(value):
                raise AccessTokenError(f"{what} {value!r} must be 1 to 64 printable characters")
        if not name.strip() or len(name) > 200:
            raise AccessTokenError("--name must be 1 to 200 characters")
        try:
            patterns = sorted(parse_scopes(scopes))
        except ValueError as exc:
            raise AccessTokenError(str(exc)) from None
        if lifetime > dt.timedelta(days=MAX_ACCESS_TOKEN_DAYS):
            raise AccessTokenError(f"a token may live at most {MAX_ACCESS_TOKEN_DAYS} days")
        token = ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = dt.datetime.now(dt.UTC)
        row: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "token_hash": digest(token),
            "tenant_id": tenant_id,
            "user_id": user_id,
            "name": name.strip(),
            "roles": role_list if roles is not None else None,
            "scopes": patterns,
            "agent": agent,
            "created_by": created_by,
            "created_at": now,
            "expires_at": now + lifetime,
            "revoked_at": None,
        }
        if conn is not None:
            conn.execute(insert(self._table).values(row))
        else:
            with self._own_transaction() as own:
                own.execute(insert(self._table).values(row))
        return NewAccessToken(token, describe(row))

    def user_of(self, token: str) -> SessionUser:
        """The principal of ``token``; raises ``AuthenticationError`` for an unknown,
        expired or revoked one."""
        row = self._row_of(digest(token))
        if row is None:
            raise refused("unknown_token", "no personal access token matches")
        if row["expires_at"] <= dt.datetime.now(dt.UTC):
            raise AuthenticationError(Reasons.TOKEN_EXPIRED)
        if row["revoked_at"] is not None or self._revocations.is_revoked(
            row["tenant_id"], row["id"]
        ):
            raise AuthenticationError(Reasons.TOKEN_REVOKED, jti=row["id"])
        grant = row["roles"] is None
        user = SessionUser.of(row["user_id"], row["tenant_id"], row["roles"] or []).with_scopes(
            frozenset(row["scopes"]), grant=grant
        )
        if row["agent"]:
            user = user.as_agent(row["agent"])
        return user.with_token(row["id"], int(row["expires_at"].timestamp()))

    def list(
        self, tenant_id: str, user_id: str | None = None, conn: Connection | None = None
    ) -> list[dict[str, Any]]:
        """The tokens of a tenant (of one user with ``user_id``), newest first, without
        their digests."""
        table = self._table
        query = select(table).where(table.c.tenant_id == tenant_id)
        if user_id is not None:
            query = query.where(table.c.user_id == user_id)
        query = query.order_by(table.c.created_at.desc())
        if conn is not None:
            rows = conn.execute(query).mappings().all()
        else:
            with self._own_connection() as own:
                rows = own.execute(query).mappings().all()
        return [describe(dict(row)) for row in rows]

    def revoke(
        self,
        tenant_id: str,
        token_id: str,
        *,
        revoked_by: str,
        user_id: str | None = None,
        conn: Connection | None = None,
    ) -> dict[str, Any] | None:
        """Revoke the token ``token_id`` of ``tenant_id`` (of ``user_id`` when given); the
        token as it was, ``None`` when there is no such token."""
        table = self._table
        condition = (table.c.tenant_id == tenant_id) & (table.c.id == token_id)
        if user_id is not None:
            condition = condition & (table.c.user_id == user_id)

        def run(db: Connection) -> dict[str, Any] | None:
            found = db.execute(select(table).where(condition)).mappings().first()
            if found is None:
                return None
            now = dt.datetime.now(dt.UTC)
            db.execute(update(table).where(condition).values(revoked_at=now))
            self._revocations.revoke(
                tenant_id, token_id, expires_at=found["expires_at"], revoked_by=revoked_by,
                conn=db,
            )  # fmt: skip
            return describe({**found, "revoked_at": found["revoked_at"] or now})

        if conn is not None:
            result = run(conn)
        else:
            with self._own_transaction() as own:
                result = run(own)
        return result

    def _row_of(self, token_hash: str) -> dict[str, Any] | None:
        # Read on every call, not cached: a revoked or expired token is refused by every
        # process at once (scripts and CI jobs call far less often than browsers).
        table = self._table
        with self._own_connection() as conn:
            found = (
                conn.execute(select(table).where(table.c.token_hash == token_hash))
                .mappings()
                .first()
            )
        return dict(found) if found is not None else None

    def _own_connection(self) -> AbstractContextManager[Connection]:
        if self._database is None:
            raise RuntimeError("this token store reads only through a caller's connection")
        return self._database.connect()

    def _own_transaction(self) -> AbstractContextManager[Connection]:
        if self._database is None:
            raise RuntimeError("this token store writes only through a caller's connection")
        return self._database.begin()


def describe(row: dict[str, Any]) -> dict[str, Any]:
    """A token's row as shown to its owner: never the digest."""

    def iso(moment: dt.datetime | None) -> str | None:
        return moment.isoformat() if moment is not None else None

    return {
        "id": row["id"],
        "name": row["name"],
        "tenant": row["tenant_id"],
        "user": row["user_id"],
        "roles": list(row["roles"]) if row["roles"] is not None else None,
        "scopes": list(row["scopes"]),
        "agent": row["agent"],
        "createdBy": row["created_by"],
        "createdAt": iso(row["created_at"]),
        "expiresAt": iso(row["expires_at"]),
        "revokedAt": iso(row["revoked_at"]),
    }
