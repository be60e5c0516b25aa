"""The per-tenant state of features: configuration values, sealed secrets and switches.

``FeatureSettings`` reads and writes the rows of ``asanoha_feature_settings`` for the
features of one registry. The bundled ``config`` and ``secrets`` handlers and the CLI set
values through it; handler contexts read them (``ctx.config``, ``ctx.secrets``); admission
asks it whether a toggleable feature is on for the caller's tenant.

A secret is sealed with the personal-data machinery under the tenant's key (the subject
``$tenant``, the scope ``secret:<feature>``), so it is never stored readable, and forgetting
the tenant's key makes it unreadable with the rest of the tenant's sealed values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select

from asanoha.platform.errors import (
    AccessDeniedError,
    NotFoundError,
    Reasons,
    UnprocessableError,
)
from asanoha.platform.model import HandlerDef, Registry
from asanoha.platform.model.feature_settings import (
    BUILTIN_CONFIG,
    TENANT_SCOPE,
    ConfigDef,
    SecretDef,
)
from asanoha.platform.personal import cipher
from asanoha.platform.personal.sentinel import FORGOTTEN
from asanoha.platform.personal.subject_keys import TENANT_SUBJECT
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.service import secret_guard
from asanoha.platform.store import Database, Tables
from asanoha.platform.store.feature_settings_rows import (
    CONFIG,
    EVERY_TENANT,
    SECRET,
    TOGGLE,
)

#: The key of a feature's switch row.
_ENABLED = "enabled"


class FeatureSettings:
    """Configuration, secrets and switches of the features of one registry, per tenant."""

    def __init__(
        self, registry: Registry, tables: Tables, personal: PersonalData, database: Database
    ) -> None:
        self._table = tables.feature_settings
        self._personal = personal
        self._database = database
        #: feature -> key -> definition; the platform's own keys under ``TENANT_SCOPE``.
        self.configs: dict[str, dict[str, ConfigDef]] = {TENANT_SCOPE: dict(BUILTIN_CONFIG)}
        #: feature -> name -> definition.
        self.secrets: dict[str, dict[str, SecretDef]] = {}
        #: toggleable feature -> whether it is on where nobody switched it.
        self.toggleable: dict[str, bool] = {}
        for feature in registry.features:
            if feature.configs:
                self.configs[feature.name] = dict(feature.configs)
            if feature.secrets:
                self.secrets[feature.name] = dict(feature.secrets)
            if feature.toggleable:
                self.toggleable[feature.name] = feature.default_on

    # -- switches ---------------------------------------------------------------------------

    def check_enabled(self, handler: HandlerDef, tenant_id: str, conn: Connection | None) -> None:
        """Refuse a call of ``handler`` when its feature is switched off in the tenant: 403
        ``feature_disabled`` naming the feature. ``conn``: the caller's open transaction
        (a nested call), else the state is read on a connection of its own."""
        if handler.feature not in self.toggleable:
            return
        if conn is not None:
            enabled = self.is_enabled(conn, tenant_id, handler.feature)
        else:
            with self._database.connect() as own:
                enabled = self.is_enabled(own, tenant_id, handler.feature)
        if not enabled:
            raise AccessDeniedError(
                Reasons.FEATURE_DISABLED, feature=handler.feature, handler=handler.qn
            )

    def is_enabled(self, conn: Connection, tenant_id: str, feature: str) -> bool:
        """Whether ``feature`` is on in the tenant (every feature that is not toggleable is)."""
        default_on = self.toggleable.get(feature)
        if default_on is None:
            return True
        stored = conn.execute(
            select(self._table.c.value).where(self._row(tenant_id, feature, TOGGLE, _ENABLED))
        ).scalar_one_or_none()
        return default_on if stored is None else stored is True

    def list_switches(self, conn: Connection, tenant_id: str) -> list[dict[str, Any]]:
        """Every toggleable feature, whether it is on in the tenant, and whether it is on
        where nobody switched it."""
        return [
            {
                "feature": feature,
                "enabled": self.is_enabled(conn, tenant_id, feature),
                "default_on": default_on,
            }
            for feature, default_on in sorted(self.toggleable.items())
        ]

    def set_enabled(
        self, conn: Connection, tenant_id: str, feature: str, enabled: bool, by: str | None
    ) -> None:
        """Switch ``feature`` on or off in the tenant (``ValueError`` for a feature that is
        not declared ``toggleable=True``)."""
        if feature not in self.toggleable:
            known = ", ".join(sorted(self.toggleable)) or "none"
            raise ValueError(
                f"feature {feature!r} is not declared Feature(..., toggleable=True) "
                f"(toggleable features: {known})"
            )
        self._put(conn, tenant_id, feature, TOGGLE, _ENABLED, enabled, by)

    # -- configuration ----------------------------------------------------------------------

    def config_def(self, feature: str, key: str) -> ConfigDef:
        """The declaration of ``feature``'s ``key`` (404 ``config_key_not_found``)."""
        found = self.configs.get(feature, {}).get(key)
        if found is None:
            raise NotFoundError(Reasons.CONFIG_KEY_NOT_FOUND, feature=feature, key=key)
        return found

    def read_config(self, conn: Connection, tenant_id: str, feature: str) -> dict[str, Any]:
        """Every key of ``feature`` with the value that holds in the tenant: the tenant's
        own (for a per-tenant key), else the one set for every tenant, else the default."""
        declared = self.configs.get(feature, {})
        if not declared:
            return {}
        stored = self._stored_config(conn, tenant_id, feature)
        return {key: _effective(found, stored)[0] for key, found in declared.items()}

    def list_config(self, conn: Connection, tenant_id: str) -> list[dict[str, Any]]:
        """Every declared key of every feature, with the value that holds in the tenant and
        where it comes from (``tenant``, ``all`` or ``default``)."""
        listed: list[dict[str, Any]] = []
        for feature, declared in sorted(self.configs.items()):
            stored = self._stored_config(conn, tenant_id, feature)
            for key, found in sorted(declared.items()):
                value, source = _effective(found, stored)
                listed.append(
                    {
                        "feature": None if feature == TENANT_SCOPE else feature,
                        "key": key,
                        "value": value,
                        "default": found.default,
                        "source": source,
                        "per_tenant": found.per_tenant,
                    }
                )
        return listed

    def set_config(
        self,
        conn: Connection,
        tenant_id: str | None,
        feature: str,
        key: str,
        value: Any,
        by: str | None,
        *,
        for_every_tenant: bool = False,
    ) -> Any:
        """Set ``feature``'s ``key`` in the tenant (``for_every_tenant``: for every tenant,
        the only way to set a ``per_tenant=False`` key); ``None`` goes back to the default.
        Returns the value stored (validated and converted)."""
        found = self.config_def(feature, key)
        if not for_every_tenant and not found.per_tenant:
            raise AccessDeniedError(Reasons.CONFIG_NOT_PER_TENANT, feature=feature, key=key)
        tenant = EVERY_TENANT if for_every_tenant or tenant_id is None else tenant_id
        if value is None:
            conn.execute(delete(self._table).where(self._row(tenant, feature, CONFIG, key)))
            return None
        try:
            checked = found.coerce(value)
        except ValueError as exc:
            raise UnprocessableError(
                Reasons.CONFIG_VALUE_INVALID, feature=feature, key=key, error=str(exc)
            ) from None
        self._put(conn, tenant, feature, CONFIG, key, checked, by)
        return checked

    def _stored_config(
        self, conn: Connection, tenant_id: str, feature: str
    ) -> dict[tuple[str, str], Any]:
        table = self._table
        rows = conn.execute(
            select(table.c.tenant_id, table.c.key, table.c.value).where(
                table.c.tenant_id.in_([tenant_id, EVERY_TENANT]),
                table.c.feature == feature,
                table.c.kind == CONFIG,
            )
        )
        return {
            ("all" if row.tenant_id == EVERY_TENANT else "tenant", row.key): row.value
            for row in rows
        }

    # -- secrets ----------------------------------------------------------------------------

    def secret_def(self, feature: str, name: str) -> SecretDef:
        """The declaration of ``feature``'s secret ``name`` (404 ``secret_not_found``)."""
        found = self.secrets.get(feature, {}).get(name)
        if found is None:
            raise NotFoundError(Reasons.SECRET_NOT_FOUND, feature=feature, name=name)
        return found

    def set_secret(
        self, conn: Connection, tenant_id: str, feature: str, name: str, value: str | None
    ) -> bool:
        """Store ``value`` sealed as ``feature``'s secret ``name`` in the tenant (``None``
        removes it); whether a value is set now. Refused (422
        ``secrets_need_master_key``) where values cannot be sealed."""
        self.secret_def(feature, name)
        row = self._row(tenant_id, feature, SECRET, name)
        if value is None:
            conn.execute(delete(self._table).where(row))
            return False
        if not self._personal.encrypts:
            raise UnprocessableError(Reasons.SECRETS_NEED_MASTER_KEY, feature=feature, name=name)
        # Known to the guard before it is sealed: the request that sets it may not echo it.
        secret_guard.note_secret(value)
        vault = self._personal.vault(conn)
        sealed = vault.seal(tenant_id, TENANT_SUBJECT, _secret_scope(feature), name, value)
        if sealed is FORGOTTEN:
            raise UnprocessableError(Reasons.SECRETS_NEED_MASTER_KEY, feature=feature, name=name)
        self._put(conn, tenant_id, feature, SECRET, name, sealed, None)
        return True

    def secrets_set(self, conn: Connection, tenant_id: str) -> list[dict[str, Any]]:
        """Every declared secret and whether the tenant has set it (never its value)."""
        table = self._table
        present = {
            (row.feature, row.key)
            for row in conn.execute(
                select(table.c.feature, table.c.key).where(
                    table.c.tenant_id == tenant_id, table.c.kind == SECRET
                )
            )
        }
        return [
            {"feature": feature, "name": name, "is_set": (feature, name) in present}
            for feature, declared in sorted(self.secrets.items())
            for name in sorted(declared)
        ]

    def read_secrets(self, conn: Connection, tenant_id: str, feature: str) -> dict[str, str]:
        """``feature``'s secrets that the tenant set, opened; each value is kept out of the
        caller's logs and refused in its output from now on (``secret_guard``)."""
        if feature not in self.secrets:
            return {}
        table = self._table
        rows = conn.execute(
            select(table.c.key, table.c.value).where(
                table.c.tenant_id == tenant_id,
                table.c.feature == feature,
                table.c.kind == SECRET,
            )
        ).all()
        if not rows:
            return {}
        vault = self._personal.vault(conn)
        opened: dict[str, str] = {}
        for row in rows:
            parsed = cipher.parse(row.value) if isinstance(row.value, str) else None
            # Only a value sealed for this tenant, feature and name opens as this secret.
            if parsed is None or parsed.key_ref != (tenant_id, TENANT_SUBJECT):
                continue
            if (parsed.scope, parsed.field) != (_secret_scope(feature), row.key):
                continue
            value = vault.open(row.value)
            if isinstance(value, str):
                secret_guard.note_secret(value)
                opened[row.key] = value
        return opened

    # -- rows -------------------------------------------------------------------------------

    def _row(self, tenant_id: str, feature: str, kind: str, key: str) -> Any:
        table = self._table
        return and_(
            table.c.tenant_id == tenant_id,
            table.c.feature == feature,
            table.c.kind == kind,
            table.c.key == key,
        )

    def _put(
        self,
        conn: Connection,
        tenant_id: str,
        feature: str,
        kind: str,
        key: str,
        value: Any,
        by: str | None,
    ) -> None:
        # Delete then insert: one statement pair on both databases; the primary key keeps
        # two concurrent setters from leaving two rows (the second waits, then wins).
        conn.execute(delete(self._table).where(self._row(tenant_id, feature, kind, key)))
        conn.execute(
            insert(self._table).values(
                tenant_id=tenant_id,
                feature=feature,
                kind=kind,
                key=key,
                value=value,
                updated_at=dt.datetime.now(dt.UTC),
                updated_by=by,
            )
        )


def _secret_scope(feature: str) -> str:
    return f"secret:{feature}"


def _effective(found: ConfigDef, stored: Mapping[tuple[str, str], Any]) -> tuple[Any, str]:
    """The value of ``found`` that holds, and where it comes from."""
    if found.per_tenant and ("tenant", found.key) in stored:
        return stored["tenant", found.key], "tenant"
    if ("all", found.key) in stored:
        return stored["all", found.key], "all"
    return found.default, "default"


class TenantConfig(Mapping[str, Any]):
    """``ctx.config``: the configuration of the handler's feature in its tenant, read once
    per handler call. An undeclared key raises ``KeyError`` naming the feature."""

    def __init__(self, feature: str, values: dict[str, Any]) -> None:
        self._feature = feature
        self._values = values

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise KeyError(
                f"feature {self._feature!r} declares no config {key!r}; "
                f'declare it with feature.config("{key}", default=...)'
            )
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"TenantConfig({self._feature!r}, {self._values!r})"


class TenantSecrets(Mapping[str, str]):
    """``ctx.secrets``: the secrets of the handler's feature in its tenant. A declared
    secret the tenant has not set raises ``KeyError`` (``get`` answers ``None``); the values
    never show in ``repr``."""

    def __init__(self, feature: str, declared: Mapping[str, SecretDef], values: dict[str, str]):
        self._feature = feature
        self._declared = declared
        self._values = values

    def __getitem__(self, name: str) -> str:
        if name not in self._declared:
            raise KeyError(
                f'feature {self._feature!r} declares no secret {name!r}; declare it with feature.secret("{name}")'
            )
        if name not in self._values:
            raise KeyError(
                f"secret {self._feature}.{name} is not set for this tenant "
                "(set it through secrets:write:set)"
            )
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"TenantSecrets({self._feature!r}, names={sorted(self._values)!r})"
