"""Schema migrations (Alembic): the platform's own history lives in ``versions/`` here.

Checking a schema (``schema_status``) does not load Alembic; running or writing migrations
does, on first use of those functions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from asanoha.platform.store.migrations.revisions import (
    APP_VERSION_TABLE,
    PLATFORM_VERSION_TABLE,
    app_head,
    database_revision,
    platform_head,
    record_platform_head,
)
from asanoha.platform.store.migrations.status import SchemaStatus, schema_status

if TYPE_CHECKING:
    from asanoha.platform.store.migrations.runner import (
        app_upgrade_sql,
        init_app_migrations,
        platform_upgrade_sql,
        run_env,
        upgrade_app,
        upgrade_platform,
        write_app_revision,
    )

__all__ = [
    "APP_VERSION_TABLE",
    "PLATFORM_VERSION_TABLE",
    "SchemaStatus",
    "app_head",
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

#: What ``runner.py`` (which imports Alembic) provides, imported when first asked for.
_RUNNER = frozenset(
    {
        "app_upgrade_sql",
        "init_app_migrations",
        "platform_upgrade_sql",
        "run_env",
        "upgrade_app",
        "upgrade_platform",
        "write_app_revision",
    }
)


def __getattr__(name: str) -> Any:
    if name in _RUNNER:
        runner = importlib.import_module("asanoha.platform.store.migrations.runner")
        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
