"""Which ``KeyWrapper`` the settings give, and the refusal to run without one in production."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy.engine import make_url

from asanoha.platform.model import Registry
from asanoha.platform.personal.master_keys import (
    KeyWrapper,
    LocalKeyWrapper,
    generate_master_key,
)
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.settings import Settings

#: The master key the embedded default makes, beside its SQLite file.
EMBEDDED_KEY_FILE = "asanoha-master.key"

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


def embedded_key_path(settings: Settings) -> Path | None:
    """Where the embedded default keeps its master key: beside its SQLite file (``None`` for
    an in-memory database)."""
    database = make_url(settings.database_url).database
    if not database or database == ":memory:":
        return None
    return Path(database).resolve().parent / EMBEDDED_KEY_FILE


def prepare_personal_data(
    settings: Settings, registry: Registry, personal: PersonalData, process: str
) -> str | None:
    """Before ``serve`` or ``worker`` runs the application of ``registry``: on the embedded
    default without a master key, read or make the one beside the SQLite file and let
    ``personal`` (the service's) seal with it (returns what to tell the user); else refuse a
    production start without a key (``MissingMasterKeyError``)."""
    if settings.master_key or not has_personal_data(registry):
        return None
    path = embedded_key_path(settings) if settings.uses_embedded_default else None
    if path is None:
        check_personal_data_keys(settings, registry, process)
        return None
    made = not path.exists()
    if made:
        path.write_text(generate_master_key() + "\n")
        path.chmod(0o600)
    key = path.read_text().strip()
    personal.wrapper = LocalKeyWrapper.from_text(key)
    # The server processes this one starts (--reload, --workers) read it from here.
    os.environ["ASANOHA_MASTER_KEY"] = key
    action = "made a master key for personal data in" if made else "personal data keys from"
    return (
        f"{action} {path} (the embedded default): keep it with the database, and away from "
        "its backups; set ASANOHA_MASTER_KEY in production"
    )
