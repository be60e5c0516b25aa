"""Where settings come from: ``ASANOHA_*`` variables, and a ``.env`` file in the working
directory beneath them."""

from __future__ import annotations

from pathlib import Path

import pytest

from asanoha.platform.settings import Settings


@pytest.fixture
def folder_with_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".env").write_text(
        "ASANOHA_QUEUE_PREFIX=from-dotenv\n"
        "ASANOHA_RELAY_INTERVAL=2.5\n"
        "OTHER_TOOL_SETTING=ignored\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASANOHA_QUEUE_PREFIX", raising=False)
    monkeypatch.delenv("ASANOHA_RELAY_INTERVAL", raising=False)
    return tmp_path


def test_a_dotenv_file_in_the_working_directory_is_read(folder_with_dotenv: Path) -> None:
    settings = Settings()
    assert (settings.queue_prefix, settings.relay_interval) == ("from-dotenv", 2.5)


def test_the_environment_wins_over_the_dotenv_file(
    folder_with_dotenv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASANOHA_QUEUE_PREFIX", "from-environment")
    assert Settings().queue_prefix == "from-environment"


def test_without_a_dotenv_file_the_defaults_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASANOHA_QUEUE_PREFIX", raising=False)
    assert Settings().queue_prefix == "asanoha"
