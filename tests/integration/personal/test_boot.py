"""serve and worker refuse personal data without a master key outside development; the
embedded default makes one beside its SQLite file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from asanoha import App, Settings
from asanoha.platform.personal.boot import (
    EMBEDDED_KEY_FILE,
    MissingMasterKeyError,
    prepare_personal_data,
)
from asanoha.platform.personal.master_keys import generate_master_key
from tests.integration.personal.features import personal

PRODUCTION = {
    "database_url": "postgresql+psycopg://postgres@127.0.0.1:5432/nowhere",
    "broker_url": "redis://127.0.0.1:6379/0",
}


def app_with(**settings: Any) -> App:
    return App([personal], Settings(**settings), publish_jobs=False)


def prepare(app: App, process: str) -> str | None:
    """What ``serve`` and ``worker`` do before they run ``app``."""
    return prepare_personal_data(app.settings, app.registry, app.service.personal, process)


def test_a_production_start_without_a_master_key_is_refused() -> None:
    with pytest.raises(MissingMasterKeyError, match="ASANOHA_MASTER_KEY"):
        prepare(app_with(**PRODUCTION), "worker")


@pytest.mark.parametrize("allowed", [{"development": True}, {"personal_data": "plaintext"}])
def test_development_or_plaintext_starts_with_a_warning(
    allowed: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="asanoha.personal"):
        assert prepare(app_with(**PRODUCTION, **allowed), "serve") is None
    assert "plain text" in caplog.text


def test_a_master_key_lets_it_start() -> None:
    app = app_with(**PRODUCTION, master_key=generate_master_key())
    assert prepare(app, "serve") is None
    assert app.service.personal.encrypts


def test_the_embedded_default_makes_a_key_beside_its_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASANOHA_MASTER_KEY", raising=False)
    embedded = {"database_url": f"sqlite:///{tmp_path}/app.db", "broker_url": "memory://"}
    app = app_with(**embedded)
    told = prepare(app, "serve")
    key_file = tmp_path / EMBEDDED_KEY_FILE
    assert told is not None and str(key_file) in told
    assert key_file.stat().st_mode & 0o077 == 0
    assert app.service.personal.encrypts
    # The server processes it starts get the key from the environment.
    assert app_with(**embedded).settings.master_key == key_file.read_text().strip()
    # The next start reads the same key.
    monkeypatch.delenv("ASANOHA_MASTER_KEY")
    again = app_with(**embedded)
    assert "keys from" in (prepare(again, "serve") or "")
    assert again.service.personal.encrypts
