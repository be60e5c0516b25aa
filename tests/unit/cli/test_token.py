"""``asanoha token`` prints a token the API accepts, signed with the application's secret."""

from __future__ import annotations

import time

import jwt
import pytest
from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.platform.http.auth import decode_token
from asanoha.platform.settings import Settings
from tests.unit.cli.apps import SECRET

APP = "tests.unit.cli.apps:app"


def test_token_carries_the_documented_claims_and_the_api_accepts_it() -> None:
    before = int(time.time())
    result = CliRunner().invoke(
        cli,
        [
            "token",
            "--app",
            APP,
            "--sub",
            "u-1",
            "--tenant",
            "acme",
            "--roles",
            "Admin,Editor",
            "--roles",
            "User",
            "--expires-in",
            "120",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    token = result.stdout.strip()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert set(claims) == {"sub", "tenant", "roles", "iat", "exp", "jti"}
    assert (claims["sub"], claims["tenant"]) == ("u-1", "acme")
    assert claims["roles"] == ["Admin", "Editor", "User"]
    assert before + 120 <= claims["exp"] <= claims["iat"] + 120
    user = decode_token(Settings(jwt_secret=SECRET), token)
    assert (user.id, user.tenant_id, user.roles) == ("u-1", "acme", {"Admin", "Editor", "User"})


def test_token_without_roles_has_an_empty_role_list() -> None:
    result = CliRunner().invoke(cli, ["token", "--app", APP, "--sub", "u-2", "--tenant", "acme"])
    assert result.exit_code == 0
    assert jwt.decode(result.stdout.strip(), SECRET, algorithms=["HS256"])["roles"] == []


def test_token_on_the_placeholder_secret_outside_development_is_refused() -> None:
    result = CliRunner().invoke(
        cli,
        ["token", "--app", f"{APP.split(':')[0]}:placeholder_app", "--sub", "u", "--tenant", "t"],
    )
    assert result.exit_code == 1
    assert "ASANOHA_JWT_SECRET is not set" in result.stderr
    assert result.stdout == ""


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_token_on_the_placeholder_secret_in_development_warns_on_stderr() -> None:
    result = CliRunner().invoke(
        cli,
        ["token", "--app", f"{APP.split(':')[0]}:development_app", "--sub", "u", "--tenant", "t"],
    )
    assert result.exit_code == 0
    assert "placeholder secret" in result.stderr
    assert result.stdout.count(".") == 2  # the token alone, so $(asanoha token ...) works


def test_token_requires_subject_and_tenant() -> None:
    result = CliRunner().invoke(cli, ["token", "--app", APP, "--sub", "u-1"])
    assert result.exit_code == 2
    assert "Missing option '--tenant'" in result.output


def test_token_with_the_system_role_is_refused() -> None:
    result = CliRunner().invoke(
        cli, ["token", "--app", APP, "--sub", "u", "--tenant", "t", "--roles", "Admin,system"]
    )
    assert result.exit_code == 2
    assert "'system'" in result.output
    assert "jobs and consumers" in result.output


def test_token_living_longer_than_the_cap_is_refused() -> None:
    result = CliRunner().invoke(
        cli,
        ["token", "--app", APP, "--sub", "u", "--tenant", "t", "--expires-in", "86401"],
    )
    assert result.exit_code == 2
    assert "ASANOHA_JWT_MAX_TTL_SECONDS" in result.output
    at_the_cap = CliRunner().invoke(
        cli, ["token", "--app", APP, "--sub", "u", "--tenant", "t", "--expires-in", "86400"]
    )
    assert at_the_cap.exit_code == 0, at_the_cap.output
