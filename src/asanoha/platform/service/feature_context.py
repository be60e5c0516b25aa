"""What every handler context offers about its feature and its caller's place:
``ctx.config``, ``ctx.secrets``, ``ctx.locale`` and ``ctx.tz``.

Write, query, job and consumer contexts mix ``FeatureAccess`` in and say, through
``_feature_scope``, which feature they run for, in which tenant, on which connection and
for which caller. Each value is read once per context (per handler call).

Locale: the request's ``Accept-Language`` (or the one a job carries from the write that
enqueued it), else the caller's token claim ``locale``, else the tenant's ``locale`` config,
else ``en``. Time zone: the caller's token claim ``zoneinfo``, else the tenant's ``tz``
config, else UTC.
"""

from __future__ import annotations

import contextlib
import functools
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from asanoha.platform.model.feature_settings import TENANT_SCOPE
from asanoha.platform.model.place import Place
from asanoha.platform.service.feature_settings import TenantConfig, TenantSecrets

if TYPE_CHECKING:
    from asanoha.platform.service.feature_settings import FeatureSettings
    from asanoha.platform.store import Database

#: The locale when nothing names one.
DEFAULT_LOCALE = "en"


@dataclass(frozen=True)
class FeatureScope:
    """Which feature a context runs for, where, and for whom."""

    settings: FeatureSettings
    database: Database
    tenant_id: str
    feature: str
    #: The context's open transaction (``None``: read on a connection of its own).
    conn: Connection | None
    #: What the caller asked for (request headers, token claims, a job's headers).
    asked: Place


class FeatureAccess:
    """``ctx.config``, ``ctx.secrets``, ``ctx.locale``, ``ctx.tz`` (see the module)."""

    def _feature_scope(self) -> FeatureScope:
        raise NotImplementedError

    @contextlib.contextmanager
    def _settings_conn(self, scope: FeatureScope) -> Iterator[Connection]:
        if scope.conn is not None:
            yield scope.conn
            return
        with scope.database.connect() as conn:
            yield conn

    @functools.cached_property
    def _tenant_defaults(self) -> dict[str, Any]:
        scope = self._feature_scope()
        with self._settings_conn(scope) as conn:
            return scope.settings.read_config(conn, scope.tenant_id, TENANT_SCOPE)

    @functools.cached_property
    def config(self) -> TenantConfig:
        """The feature's configuration in the tenant (``feature.config``): ``ctx.config[key]``
        or ``ctx.config.get(key)``; a key the tenant never set reads as its default."""
        scope = self._feature_scope()
        with self._settings_conn(scope) as conn:
            values = scope.settings.read_config(conn, scope.tenant_id, scope.feature)
        return TenantConfig(scope.feature, values)

    @functools.cached_property
    def secrets(self) -> TenantSecrets:
        """The feature's secrets in the tenant (``feature.secret``), opened. Only the
        feature's own handlers, jobs and consumers read them; a value read here is
        redacted from logs and refused in the handler's result (500 ``secret_in_output``)."""
        scope = self._feature_scope()
        with self._settings_conn(scope) as conn:
            values = scope.settings.read_secrets(conn, scope.tenant_id, scope.feature)
        return TenantSecrets(scope.feature, scope.settings.secrets.get(scope.feature, {}), values)

    @functools.cached_property
    def locale(self) -> str:
        """The caller's locale: asked (``Accept-Language``, token), else the tenant's, else
        ``en``."""
        asked = self._feature_scope().asked.locale
        if asked:
            return asked
        configured = self._tenant_defaults.get("locale")
        return configured if isinstance(configured, str) and configured else DEFAULT_LOCALE

    @functools.cached_property
    def tz(self) -> zoneinfo.ZoneInfo:
        """The caller's time zone: the token's, else the tenant's ``tz`` config, else UTC."""
        for name in (self._feature_scope().asked.tz, self._tenant_defaults.get("tz")):
            if isinstance(name, str) and name:
                try:
                    return zoneinfo.ZoneInfo(name)
                except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                    continue
        return zoneinfo.ZoneInfo("UTC")
