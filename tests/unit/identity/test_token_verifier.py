"""The token matrix against the verifier: provider tokens (RS256, RS384, RS512, PS256, ES256,
ES384, EdDSA) from a local JWKS server and own HS256 tokens; each is accepted or refused with
its reason."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from asanoha.platform.errors import AuthenticationError
from asanoha.platform.identity import TokenVerifier
from asanoha.platform.settings import Settings
from tests.unit.identity.provider import (
    AUDIENCE,
    ISSUER,
    PROVIDER_ALGORITHMS,
    Case,
    JwksServer,
    jwks_server,
    key_pair,
    own_matrix,
    provider_matrix,
)

SECRET = secrets.token_urlsafe(32)


@pytest.fixture
def server() -> Iterator[JwksServer]:
    with jwks_server([key_pair(algorithm) for algorithm in PROVIDER_ALGORITHMS]) as running:
        yield running


def verifier_for(server: JwksServer, **overrides: object) -> TokenVerifier:
    settings = Settings(
        jwt_secret=SECRET,
        jwt_jwks_url=server.url,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        **overrides,  # type: ignore[arg-type]
    )
    return TokenVerifier(settings)


def outcome(verifier: TokenVerifier, case: Case) -> tuple[str | None, str | None]:
    try:
        verifier.verify(case.token)
    except AuthenticationError as error:
        return str(error.reason), error.details.get("cause")
    return None, None


def mismatches(verifier: TokenVerifier, cases: list[Case]) -> list[str]:
    found = []
    for case in cases:
        reason, cause = outcome(verifier, case)
        if reason != case.reason or (case.cause is not None and cause != case.cause):
            found.append(f"{case.name}: {reason}/{cause}, expected {case.reason}/{case.cause}")
    return found


@pytest.mark.parametrize("algorithm", PROVIDER_ALGORITHMS)
def test_provider_token_matrix(server: JwksServer, algorithm: str) -> None:
    assert mismatches(verifier_for(server), provider_matrix(algorithm)) == []


def test_own_token_matrix(server: JwksServer) -> None:
    assert mismatches(verifier_for(server), own_matrix(SECRET)) == []


def test_own_key_ring_checks_tokens_by_kid(server: JwksServer) -> None:
    current, previous = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    verifier = verifier_for(server, jwt_keys=f"k2={current},k1={previous}")
    assert mismatches(verifier, own_matrix(current, kid="k2")) == []
    assert mismatches(verifier, own_matrix(previous, kid="k1")[:1]) == []
    # A secret under another kid's name is refused: the kid picks the one secret.
    swapped = own_matrix(previous, kid="k2")[0]
    assert outcome(verifier, swapped) == ("token_invalid", "signature")


def test_issued_tokens_name_the_signing_kid_and_verify(server: JwksServer) -> None:
    import jwt

    from asanoha.platform.model import SessionUser

    verifier = verifier_for(server, jwt_keys=f"k2={secrets.token_urlsafe(32)}")
    token = verifier.issue(SessionUser.of("u-1", "tenant-a", ["Admin"]))
    assert jwt.get_unverified_header(token)["kid"] == "k2"
    user = verifier.verify(token)
    assert (user.id, user.tenant_id, user.roles, user.token_id is not None) == (
        "u-1",
        "tenant-a",
        frozenset({"Admin"}),
        True,
    )


def test_roles_claim_may_be_a_dotted_path(server: JwksServer) -> None:
    verifier = verifier_for(
        server,
        jwt_roles_claim="realm_access.roles",
        jwt_tenant_claim="org",
        jwt_subject_claim="uid",
    )
    right = key_pair("RS256")
    from tests.unit.identity.provider import provider_claims

    token = right.sign(
        provider_claims(
            roles=None, tenant_id=None, org="acme", uid="u-9", realm_access={"roles": ["Admin"]}
        )
    )
    user = verifier.verify(token)
    assert (user.id, user.tenant_id, user.roles) == ("u-9", "acme", frozenset({"Admin"}))


def test_provider_tokens_are_refused_without_a_provider() -> None:
    verifier = TokenVerifier(Settings(jwt_secret=SECRET))
    case = provider_matrix("RS256")[0]
    assert outcome(verifier, case) == ("token_invalid", "algorithm")


def test_keys_are_discovered_from_the_issuer(server: JwksServer) -> None:
    from tests.unit.identity.provider import provider_claims

    verifier = TokenVerifier(
        Settings(jwt_secret=SECRET, oidc_issuer=server.issuer, jwt_audience=AUDIENCE)
    )
    token = key_pair("ES256").sign(provider_claims(iss=server.issuer))
    assert verifier.verify(token).tenant_id == "tenant-a"
    # iss defaults to the issuer: the matrix's own issuer is another one.
    assert outcome(verifier, provider_matrix("ES256")[0]) == ("token_invalid", "issuer")


def test_an_identity_provider_alone_needs_no_own_secret(server: JwksServer) -> None:
    import jwt

    from asanoha.platform.identity.verifier import TokenRefusedError
    from asanoha.platform.model import SessionUser
    from asanoha.platform.settings import PLACEHOLDER_JWT_SECRET, signing_problems

    settings = Settings(jwt_jwks_url=server.url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    assert settings.uses_placeholder_secret and signing_problems(settings) == []
    verifier = TokenVerifier(settings)
    assert mismatches(verifier, provider_matrix("RS256")[:1]) == []
    # The public placeholder signs nothing and checks nothing.
    forged = jwt.encode(
        {"sub": "u-1", "tenant": "tenant-a", "roles": ["Admin"], "exp": 2**31, "iat": 2**31 - 60,
         "iss": ISSUER, "aud": AUDIENCE},
        PLACEHOLDER_JWT_SECRET,
        algorithm="HS256",
    )  # fmt: skip
    with pytest.raises(AuthenticationError) as refused:
        verifier.verify(forged)
    assert refused.value.details["cause"] == "unknown_kid"
    with pytest.raises(TokenRefusedError, match="ASANOHA_JWT_SECRET"):
        verifier.issue(SessionUser.of("u-1", "tenant-a"))


def test_an_app_on_provider_tokens_alone_warns_that_approvals_stay_in_its_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from asanoha import App, Settings

    caplog.set_level(logging.WARNING, logger="asanoha.app")
    provider_only = Settings(jwt_jwks_url="http://127.0.0.1:9/jwks.json", development=False)
    App([], provider_only)
    assert "ASANOHA_APPROVAL_SECRET is not set" in caplog.text
    caplog.clear()
    App([], provider_only.model_copy(update={"approval_secret": "a" * 40}))
    assert "ASANOHA_APPROVAL_SECRET" not in caplog.text
