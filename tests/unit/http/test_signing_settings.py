"""Signing settings that could not protect a token are refused before anything serves, and
the approval key never derives from the public placeholder outside development."""

from __future__ import annotations

import uuid

import pytest

from asanoha import App
from asanoha.cli.embedded import development_token, use_process_secret
from asanoha.platform.http.auth import decode_token
from asanoha.platform.service.approvals import ApprovalSigner, approval_key
from asanoha.platform.service.call_description import CallDescription
from asanoha.platform.settings import (
    PLACEHOLDER_JWT_SECRET,
    InsecureSettingsError,
    Settings,
    require_signing_settings,
    signing_problems,
)
from tests.unit.cli.apps import notes

MEMORY = "sqlite+pysqlite:///:memory:"
POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/not_contacted"
GOOD = "g" * 32


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (Settings(jwt_secret=""), "ASANOHA_JWT_SECRET is 0 bytes long"),
        (Settings(jwt_secret="x"), "ASANOHA_JWT_SECRET is 1 bytes long"),
        (Settings(jwt_secret="x" * 31), "at least 32 bytes"),
        (Settings(jwt_secret=GOOD, jwt_algorithm="none"), "ASANOHA_JWT_ALGORITHM is 'none'"),
        (Settings(jwt_secret=GOOD, jwt_algorithm="RS256"), "HS256, HS384, HS512"),
        (Settings(jwt_secret=GOOD, approval_secret="short"), "ASANOHA_APPROVAL_SECRET"),
        (Settings(jwt_secret=GOOD, jwt_ttl_seconds=90000), "ASANOHA_JWT_TTL_SECONDS is 90000"),
        (Settings(jwt_secret=GOOD, jwt_max_ttl_seconds=0), "ASANOHA_JWT_MAX_TTL_SECONDS is 0"),
        (Settings(), "ASANOHA_JWT_SECRET is not set"),
        (Settings(jwt_secret="change-me-to-a-long-random-string"), "example value"),
    ],
)
def test_settings_that_cannot_protect_a_token_are_refused_naming_the_variable(
    settings: Settings, named: str
) -> None:
    with pytest.raises(InsecureSettingsError, match=named):
        require_signing_settings(settings)


def test_a_short_secret_or_a_bad_algorithm_is_refused_in_development_too() -> None:
    assert signing_problems(Settings(development=True)) == []
    assert signing_problems(Settings(jwt_secret="x", development=True))
    assert signing_problems(Settings(jwt_algorithm="none", development=True))


def test_processes_that_check_no_token_may_run_on_the_placeholder_but_not_on_a_bad_secret() -> None:
    assert signing_problems(Settings(), checks_tokens=False) == []
    assert signing_problems(Settings(jwt_secret="x"), checks_tokens=False)
    assert signing_problems(Settings(jwt_algorithm="none"), checks_tokens=False)


@pytest.mark.parametrize("secret", ["", "x"])
def test_the_http_app_refuses_a_short_secret(secret: str) -> None:
    app = App([notes], Settings(database_url=MEMORY, jwt_secret=secret))
    with pytest.raises(InsecureSettingsError, match="ASANOHA_JWT_SECRET"):
        app.http  # noqa: B018 - building it is the point
    app.close()


def test_the_http_app_refuses_an_unsupported_algorithm() -> None:
    app = App([notes], Settings(database_url=MEMORY, jwt_secret=GOOD, jwt_algorithm="none"))
    with pytest.raises(InsecureSettingsError, match="ASANOHA_JWT_ALGORITHM"):
        app.http  # noqa: B018 - building it is the point
    app.close()


def call_of(app: App) -> CallDescription:
    return CallDescription(
        handler=app.registry.handler("notes:write:wipe"),
        principal="agent-1",
        tenant_id="t",
        payload={"reason": "r"},
        payload_digest="d",
        targets=(),
        changes=(),
    )


def approval_mac(signer: ApprovalSigner, app: App) -> str:
    return signer.mac(uuid.UUID(int=1), call_of(app), 2_000_000_000)


def test_serve_on_the_embedded_default_signs_approvals_with_no_key_of_the_placeholder() -> None:
    app = App([notes], Settings(database_url=MEMORY))
    assert use_process_secret(app)
    public = ApprovalSigner(approval_key(PLACEHOLDER_JWT_SECRET))
    assert approval_mac(app.service.approvals.signer, app) != approval_mac(public, app)
    app.close()


def test_the_approval_key_follows_the_approval_secret_or_the_token_secret() -> None:
    own = "a" * 40
    with_own = App([notes], Settings(database_url=MEMORY, jwt_secret=GOOD, approval_secret=own))
    derived = App([notes], Settings(database_url=MEMORY, jwt_secret=GOOD))
    for app, secret in ((with_own, own), (derived, GOOD)):
        expected = ApprovalSigner(approval_key(secret))
        assert approval_mac(app.service.approvals.signer, app) == approval_mac(expected, app)
        app.close()


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_development_keeps_the_placeholder_approval_key_shared_by_its_processes() -> None:
    app = App([notes], Settings(database_url=POSTGRES, development=True))
    public = ApprovalSigner(approval_key(PLACEHOLDER_JWT_SECRET))
    assert approval_mac(app.service.approvals.signer, app) == approval_mac(public, app)
    app.close()


def test_only_development_or_the_embedded_default_signs_with_a_secret_of_the_process() -> None:
    embedded = App([notes], Settings(database_url=MEMORY))
    development = App([notes], Settings(database_url=POSTGRES, development=True))
    deployed = App([notes], Settings(database_url=POSTGRES))
    configured = App([notes], Settings(database_url=MEMORY, jwt_secret=GOOD))
    assert use_process_secret(embedded) and use_process_secret(development)
    assert not use_process_secret(deployed) and not use_process_secret(configured)
    assert deployed.settings.jwt_secret == PLACEHOLDER_JWT_SECRET
    assert configured.settings.jwt_secret == GOOD
    for app in (embedded, development, deployed, configured):
        app.close()


def test_the_development_token_holds_every_role_but_system() -> None:
    from asanoha import Access, Entity, Feature, fields

    jobs_only = Feature("jobs-only")
    entity = Entity(table="jo_rows", fields={"n": fields.integer(personal=False, reason="x")})
    jobs_only.crud("row", entity, write=Access(roles=["system"]), read=Access(roles=["Viewer"]))
    app = App([notes, jobs_only], Settings(database_url=MEMORY))
    assert use_process_secret(app)
    user = decode_token(app.settings, development_token(app))
    assert "system" not in user.roles
    assert {"Admin", "Viewer"} <= user.roles
    app.close()
