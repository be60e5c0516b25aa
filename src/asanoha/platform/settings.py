"""Settings from ``ASANOHA_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

EMBEDDED_DATABASE_URL = "sqlite+pysqlite:///asanoha.sqlite3"
EMBEDDED_BROKER_URL = "memory://"
#: The placeholder secret; an HTTP app built with it logs a warning.
PLACEHOLDER_JWT_SECRET = "change-me-in-production"


class Settings(BaseSettings):
    """Runtime configuration. With nothing set: SQLite file and the in-process broker."""

    model_config = SettingsConfigDict(env_prefix="ASANOHA_", extra="ignore")

    database_url: str = EMBEDDED_DATABASE_URL
    database_pool_size: int = 10
    #: Test each pooled connection before use (one extra round trip per transaction).
    database_pre_ping: bool = False
    broker_url: str = EMBEDDED_BROKER_URL
    #: Prefix of every queue name, so several stacks can share one broker without seeing
    #: each other's messages.
    queue_prefix: str = "asanoha"
    #: Redis visibility timeout in seconds: no countdown or job timeout may exceed it.
    visibility_timeout: float = 3600.0
    jwt_secret: str = PLACEHOLDER_JWT_SECRET
    jwt_algorithm: str = "HS256"
    jwt_ttl_seconds: int = 3600
    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = 32
    development: bool = False
    default_tenant: str = "default"
    #: Seconds between the consumer passes every worker runs as a safety net (0: none).
    consumer_tick_interval: float = 1.0
    #: After a commit that appended events a consumer follows, publish a (coalesced) task
    #: that advances the consumers.
    consumer_wake: bool = True
