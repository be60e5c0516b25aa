"""The public placeholder JWT secret is refused outside development."""

from __future__ import annotations

import jwt
import pytest
from typer.testing import CliRunner

from asanoha import App
from asanoha.cli import cli
from asanoha.platform.settings import (
    PLACEHOLDER_JWT_SECRET,
    InsecureSettingsError,
    Settings,
    with_process_secret,
)
from tests.unit.cli.apps import notes

MEMORY = "sqlite+pysqlite:///:memory:"


def test_the_http_app_refuses_the_placeholder_secret_naming_the_setting() -> None:
    app = App([notes], Settings(database_url=MEMORY))
    with pytest.raises(InsecureSettingsError, match="ASANOHA_JWT_SECRET") as refused:
        app.http  # noqa: B018 - building it is the point
    assert "ASANOHA_DEVELOPMENT=true" in str(refused.value)
    app.close()


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_development_mode_may_use_the_placeholder_secret() -> None:
    app = App([notes], Settings(database_url=MEMORY, development=True))
    assert app.http.title == "asanoha"
    app.close()


def test_serve_with_several_workers_refuses_the_placeholder_secret() -> None:
    # One worker would sign with a secret of its own process; several could not share it.
    result = CliRunner().invoke(
        cli,
        ["serve", "--app", "tests.unit.cli.apps:placeholder_app", "--port", "1", "--workers", "2"],
    )
    assert result.exit_code == 1
    assert "ASANOHA_JWT_SECRET is not set" in result.stderr


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_the_demo_signs_with_a_random_secret_of_its_process() -> None:
    from asanoha.handlers.demo.app import app

    assert not app.settings.uses_placeholder_secret
    assert len(app.settings.jwt_secret) >= 32
    forged = jwt.encode({"sub": "x"}, PLACEHOLDER_JWT_SECRET, algorithm="HS256")
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(forged, app.settings.jwt_secret, algorithms=["HS256"])


def test_a_process_secret_replaces_only_the_placeholder() -> None:
    assert with_process_secret(Settings()).jwt_secret != PLACEHOLDER_JWT_SECRET
    assert with_process_secret(Settings()).jwt_secret != with_process_secret(Settings()).jwt_secret
    assert with_process_secret(Settings(jwt_secret="s" * 40)).jwt_secret == "s" * 40
