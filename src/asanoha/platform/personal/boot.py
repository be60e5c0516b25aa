"""Which ``KeyWrapper`` the settings give, and the refusal to run without one in production."""

from __future__ import annotations

import logging

from asanoha.platform.model import Registry
from asanoha.platform.personal.master_keys import KeyWrapper, LocalKeyWrapper
from asanoha.platform.settings import Settings

log = logging.getLogger("asanoha.personal")


class MissingMasterKeyError(RuntimeError):
    """An application with personal fields and no master key, outside development."""


def key_wrapper_of(settings: Settings) -> KeyWrapper | None:
    """The local wrapper of ``ASANOHA_MASTER_KEY``; ``None`` without one."""
    if not settings.master_key:
        return None
    return LocalKeyWrapper.from_text(settings.master_key)


def has_personal_data(registry: Registry) -> bool:
    """Whether any entity field or domain event of the registry holds personal data."""
    return any(e.entity.personal_fields for e in registry.entities) or any(
        event.pii != "none" for event in registry.events
    )


def check_personal_data_keys(settings: Settings, registry: Registry, process: str) -> None:
    """Refuse to run ``process`` (serve, worker) for an application with personal data and no
    master key, unless in development or ``ASANOHA_PERSONAL_DATA=plaintext`` (warned)."""
    if settings.master_key or not has_personal_data(registry):
        return
    if settings.development or settings.personal_data == "plaintext":
        log.warning(
            "%s: no ASANOHA_MASTER_KEY: personal values are stored in plain text and stay "
            "readable after a forget; set a master key (asanoha keys generate) in production",
            process,
        )
        return
    raise MissingMasterKeyError(
        f"asanoha {process}: the application holds personal data and ASANOHA_MASTER_KEY is not "
        "set, so it would be stored in plain text. Set ASANOHA_MASTER_KEY (make one with "
        "`asanoha keys generate`; keep it outside the database and its backups), or "
        "ASANOHA_PERSONAL_DATA=plaintext / ASANOHA_DEVELOPMENT=true on a development machine."
    )
