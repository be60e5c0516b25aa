"""Settings from ``ASANOHA_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

import secrets

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

EMBEDDED_DATABASE_URL = "sqlite+pysqlite:///asanoha.sqlite3"
EMBEDDED_BROKER_URL = "memory://"
#: The placeholder secret: public, so the HTTP app refuses it outside development.
PLACEHOLDER_JWT_SECRET = "change-me-in-production"


class InsecureSettingsError(ValueError):
    """The settings would let anyone in (the public placeholder JWT secret)."""


class Settings(BaseSettings):
    """Runtime configuration. With nothing set: SQLite file and the in-process broker."""

    model_config = SettingsConfigDict(env_prefix="ASANOHA_", extra="ignore")

    database_url: str = EMBEDDED_DATABASE_URL
    database_pool_size: int = 10
    #: Test each pooled connection before use (one extra round trip per transaction), so a
    #: database restart costs no failed call per stale connection.
    database_pre_ping: bool = True
    broker_url: str = EMBEDDED_BROKER_URL
    #: Prefix of every queue name, so several stacks can share one broker without seeing
    #: each other's messages.
    queue_prefix: str = "asanoha"
    #: Redis visibility timeout in seconds: no countdown or job timeout may exceed it.
    visibility_timeout: float = 3600.0
    #: Seconds a job attempt may run when the job declares no ``timeout=``.
    job_timeout: float = 300.0
    #: Longest retry countdown held by the broker; longer ones wait in the database and the
    #: relay publishes them when due (also capped so countdown + timeout + grace stays below
    #: the visibility timeout).
    broker_countdown_max: float = 60.0
    #: Seconds between two relay passes of each ``asanoha worker``.
    relay_interval: float = 1.0
    #: Days a finished job row and its run rows are kept before the bundled prune job
    #: deletes them.
    job_retention_days: float = 7.0
    jwt_secret: str = PLACEHOLDER_JWT_SECRET
    jwt_algorithm: str = "HS256"
    jwt_ttl_seconds: int = 3600
    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = 32
    #: Items a ``POST /api/batch`` may hold: one transaction runs them all, and a batch that
    #: outlasts its client's timeout is committed while the client thinks it failed.
    max_batch_items: int = Field(default=100, ge=1)
    development: bool = False
    #: The tenant of anonymous callers (at most 64 characters, like every tenant id).
    default_tenant: str = Field(default="default", min_length=1, max_length=64)
    #: The tenant that operates the whole application (its SystemAdmins restart, skip,
    #: disable and enable consumers, which every tenant shares); unset: none, only the CLI.
    operator_tenant: str | None = Field(default=None, min_length=1, max_length=64)
    #: Seconds between the consumer passes every worker runs as a safety net (0: none).
    consumer_tick_interval: float = 1.0
    #: After a commit that appended events a consumer follows, publish a (coalesced) task
    #: that advances the consumers.
    consumer_wake: bool = True

    @property
    def uses_placeholder_secret(self) -> bool:
        """Whether tokens would be signed with the public placeholder secret."""
        return self.jwt_secret == PLACEHOLDER_JWT_SECRET


def require_signing_secret(settings: Settings) -> None:
    """Refuse the placeholder JWT secret unless ``ASANOHA_DEVELOPMENT=true``.

    The placeholder is published in the source: anyone could sign an Admin token with it.
    """
    if settings.uses_placeholder_secret and not settings.development:
        raise InsecureSettingsError(
            "ASANOHA_JWT_SECRET is not set: bearer tokens would be signed with the public "
            "placeholder secret, so anyone could mint an Admin token. Set ASANOHA_JWT_SECRET "
            "to a long random value (python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "or set ASANOHA_DEVELOPMENT=true on a development machine."
        )


def with_process_secret(settings: Settings) -> Settings:
    """``settings`` with a random secret of this process in place of the placeholder.

    For embedded runs (the demo): tokens are valid only for the process that minted them.
    """
    if not settings.uses_placeholder_secret:
        return settings
    return settings.model_copy(update={"jwt_secret": secrets.token_urlsafe(32)})
