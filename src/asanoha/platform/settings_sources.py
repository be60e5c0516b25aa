"""The effective settings, where each value came from, and what is wrong with them.

``asanoha config`` prints these; secrets never leave this module in clear.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from asanoha.platform.settings import (
    FILLED_FROM_ENV_FILE,
    PLACEHOLDER_JWT_SECRET,
    Settings,
    env_file_values,
    signing_problems,
)
from asanoha.platform.settings_docs import default_text, variable_of

#: Settings whose value is a secret: shown as ``***`` (the public placeholder excepted).
SECRET_FIELDS = frozenset({"jwt_secret", "approval_secret", "master_key"})
#: Settings whose value is a URL that may carry a password: the password is masked.
URL_FIELDS = frozenset({"database_url", "read_database_url", "broker_url", "rate_limit_url"})
#: The variables the command line reads itself (not settings of the application).
COMMAND_VARIABLES = {
    "ASANOHA_APP": False,  # name -> whether its value is a secret
    "ASANOHA_FLOWER_BASIC_AUTH": True,
}
MASK = "***"
#: Seconds a job's timeout must stay below the visibility timeout (the hard-limit grace and
#: the margin of ``workers/retry_policy.py``).
VISIBILITY_HEADROOM = 6.0

DEFAULT = "default"
ENVIRONMENT = "environment"
ENV_FILE = ".env"
APPLICATION = "application"


@dataclass(frozen=True)
class EffectiveSetting:
    """One variable, its value as it may be shown, and where the value came from."""

    variable: str
    value: str
    source: str  # default, environment, .env or application (Settings(...) in code)

    def to_json(self) -> dict[str, str]:
        return {"variable": self.variable, "value": self.value, "source": self.source}


def mask_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def shown_value(field: str, value: Any) -> str:
    """The value of the setting ``field`` as it may be printed."""
    if value is None:
        return default_text(None)
    if field in SECRET_FIELDS and value != PLACEHOLDER_JWT_SECRET:
        return MASK
    if field in URL_FIELDS:
        return mask_url(str(value))
    return default_text(value)


def source_of(variable: str, environ: Mapping[str, str], env_file: Mapping[str, str]) -> str:
    """Where the variable's value comes from: the environment wins over ``.env``."""
    if variable in environ:
        return ENV_FILE if variable in FILLED_FROM_ENV_FILE else ENVIRONMENT
    if variable in env_file:
        return ENV_FILE
    return DEFAULT


def effective_settings(
    settings: Settings | None = None, environ: Mapping[str, str] | None = None
) -> list[EffectiveSetting]:
    """Every setting with its value and source, then the command line's own variables.

    ``settings`` is the application's (``App(settings=Settings(...))``): a value that differs
    from what the environment gives came from the application's code. Raises pydantic's
    ``ValidationError`` when the environment holds a value the settings refuse.
    """
    environ = os.environ if environ is None else environ
    upper = {name.upper(): value for name, value in environ.items()}
    env_file = env_file_values()
    from_environment = Settings()
    effective = from_environment if settings is None else settings
    found: list[EffectiveSetting] = []
    for field in Settings.model_fields:
        variable = variable_of(field)
        value = getattr(effective, field)
        if value != getattr(from_environment, field):
            source = APPLICATION
        else:
            source = source_of(variable, upper, env_file)
        found.append(EffectiveSetting(variable, shown_value(field, value), source))
    for variable, secret in COMMAND_VARIABLES.items():
        source = source_of(variable, upper, env_file)
        raw = upper.get(variable, env_file.get(variable))
        shown = default_text(None) if raw is None else (MASK if secret else raw)
        found.append(EffectiveSetting(variable, shown, source))
    return found


def validation_problems(error: ValidationError) -> list[str]:
    """One line per value the settings refused, naming its variable."""
    problems = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        variable = variable_of(field) if field else "settings"
        problems.append(f"{variable}: {item['msg']} (got {item.get('input')!r})")
    return problems


def settings_problems(settings: Settings) -> list[str]:
    """What the processes would refuse in ``settings``, one line each: the signing settings
    (as ``serve`` checks them; the placeholder secret only off the embedded default), a master key that cannot be read, a job timeout that reaches
    the visibility timeout."""
    from asanoha.platform.personal.master_keys import MasterKeyError, parse_master_keys

    # The embedded default's serve signs with a random secret of its process: the
    # placeholder is no problem there (a short secret or a wrong algorithm still is).
    problems = list(signing_problems(settings, checks_tokens=not settings.uses_embedded_default))
    if settings.master_key:
        try:
            parse_master_keys(settings.master_key)
        except MasterKeyError as exc:
            problems.append(str(exc))
    if settings.job_timeout + VISIBILITY_HEADROOM >= settings.visibility_timeout:
        problems.append(
            f"ASANOHA_JOB_TIMEOUT ({settings.job_timeout:g} s) plus {VISIBILITY_HEADROOM:g} s "
            f"reaches ASANOHA_VISIBILITY_TIMEOUT ({settings.visibility_timeout:g} s): a running "
            "attempt could be delivered twice. Lower the one or raise the other."
        )
    return problems
