"""What a feature declares about itself per tenant: configuration keys (``feature.config``),
secrets (``feature.secret``) and whether it can be switched off (``Feature(toggleable=...)``).

The definitions are frozen and checked at import: a bad key, a default its declared type
refuses, or a key declared twice raises ``DefinitionError`` naming the feature and the key.
Where the values live (one row per tenant, feature and key) is ``store/feature_settings``;
reading them in a handler is ``ctx.config`` and ``ctx.secrets``.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic

from asanoha.platform.errors import DefinitionError

#: The feature name the platform's own per-tenant keys are stored under (not a valid
#: feature name, so no feature can collide with it).
TENANT_SCOPE = "$tenant"
#: Keys and secret names: lower-case words joined by ``_`` or ``-`` (``smtp_password``).
_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,99}$")


def check_zone(value: Any) -> str:
    """``value`` if it names an IANA time zone (``Europe/Berlin``); else ``ValueError``."""
    if not isinstance(value, str) or not value:
        raise ValueError("a time zone is an IANA name such as 'Europe/Berlin'")
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r}") from exc
    return value


def check_locale(value: Any) -> str:
    """``value`` if it is a language tag (``en``, ``de-AT``); else ``ValueError``."""
    if not isinstance(value, str) or not re.fullmatch(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*", value):
        raise ValueError("a locale is a language tag such as 'en' or 'de-AT'")
    return value


@dataclass(frozen=True)
class ConfigDef:
    """One configuration key of a feature: its default and the type of its values."""

    feature: str
    key: str
    default: Any
    #: A tenant's administrator may override the default for the tenant
    #: (``config:write:set``); else only ``asanoha features config set`` (every tenant).
    per_tenant: bool
    #: Validates and converts a value (from the declared ``type=``, else the default's type).
    adapter: pydantic.TypeAdapter[Any] = field(compare=False, repr=False)
    description: str | None = None

    def coerce(self, value: Any) -> Any:
        """``value`` validated for this key, as JSON; ``ValueError`` naming the key."""
        try:
            checked = self.adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{self.feature}.{self.key}: {first['msg']}") from None
        return self.adapter.dump_python(checked, mode="json")


@dataclass(frozen=True)
class SecretDef:
    """One secret of a feature (an API key, a password): set write-only per tenant, stored
    sealed under the tenant's key, readable only by the feature's own handlers and jobs."""

    feature: str
    name: str
    description: str | None = None


def declare_config(
    feature: str,
    declared: dict[str, ConfigDef],
    key: str,
    default: Any,
    *,
    per_tenant: bool,
    type_: Any,
    description: str | None,
) -> ConfigDef:
    """The definition of ``feature.config(key, ...)``, checked (``DefinitionError`` naming
    the feature and the key)."""
    where = f"feature {feature!r}, config {key!r}"
    _check_name(key, where, declared)
    if not isinstance(per_tenant, bool):
        raise DefinitionError(f"{where}: per_tenant= takes True or False, not {per_tenant!r}")
    if type_ is None:
        if default is None:
            raise DefinitionError(
                f"{where}: declare type= (str, int, a pydantic model, ...) or a non-None default"
            )
        type_ = type(default)
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(type_)
    except pydantic.PydanticSchemaGenerationError as exc:
        raise DefinitionError(f"{where}: type= {type_!r} is not a type pydantic validates") from exc
    made = ConfigDef(feature, key, default, per_tenant, adapter, description)
    if default is not None:
        try:
            made = ConfigDef(feature, key, made.coerce(default), per_tenant, adapter, description)
        except ValueError as exc:
            raise DefinitionError(f"{where}: the default {default!r} is refused: {exc}") from None
    return made


def declare_secret(
    feature: str, declared: dict[str, SecretDef], name: str, description: str | None
) -> SecretDef:
    """The definition of ``feature.secret(name)``, checked."""
    _check_name(name, f"feature {feature!r}, secret {name!r}", declared)
    return SecretDef(feature, name, description)


def _check_name(key: Any, where: str, declared: dict[str, Any]) -> None:
    if not isinstance(key, str) or not _KEY.match(key):
        raise DefinitionError(
            f"{where}: a name is lower-case letters, digits, '_' or '-', starting with a letter"
        )
    if key in declared:
        raise DefinitionError(f"{where} is declared twice")


def _builtin(key: str, default: str, check: Any, description: str) -> ConfigDef:
    checked: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
        Annotated[str, pydantic.AfterValidator(check)]
    )
    return ConfigDef(TENANT_SCOPE, key, default, True, checked, description)


#: The platform's own keys of every tenant: its time zone (``ctx.tz`` when the user's
#: token names none) and its default locale (``ctx.locale`` when the request names none).
BUILTIN_CONFIG: dict[str, ConfigDef] = {
    "tz": _builtin("tz", "UTC", check_zone, "the tenant's time zone (IANA name)"),
    "locale": _builtin("locale", "en", check_locale, "the tenant's default locale"),
}


def check_toggle(feature: str, toggleable: Any, default_on: Any) -> tuple[bool, bool]:
    """``Feature(toggleable=, default_on=)`` checked."""
    for option, value in (("toggleable", toggleable), ("default_on", default_on)):
        if not isinstance(value, bool):
            raise DefinitionError(
                f"feature {feature!r}: {option}= takes True or False, not {value!r}"
            )
    if not default_on and not toggleable:
        raise DefinitionError(
            f"feature {feature!r}: default_on=False needs toggleable=True "
            "(a feature that is off and cannot be switched on would never run)"
        )
    return toggleable, default_on
