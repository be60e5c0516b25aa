"""Schema migrations (Alembic): the platform's own history lives in ``versions/`` here."""

from asanoha.platform.store.migrations.runner import (
    APP_VERSION_TABLE,
    PLATFORM_VERSION_TABLE,
    app_upgrade_sql,
    database_revision,
    init_app_migrations,
    platform_head,
    platform_upgrade_sql,
    record_platform_head,
    run_env,
    upgrade_app,
    upgrade_platform,
    write_app_revision,
)
from asanoha.platform.store.migrations.status import SchemaStatus, schema_status

__all__ = [
    "APP_VERSION_TABLE",
    "PLATFORM_VERSION_TABLE",
    "SchemaStatus",
    "app_upgrade_sql",
    "database_revision",
    "init_app_migrations",
    "platform_head",
    "platform_upgrade_sql",
    "record_platform_head",
    "run_env",
    "schema_status",
    "upgrade_app",
    "upgrade_platform",
    "write_app_revision",
]
