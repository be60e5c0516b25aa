"""``asanoha tokens``: create prints a personal access token once (only its digest is
stored), list shows it without the secret, revoke ends it; ``asanoha token`` still works."""

from __future__ import annotations

import json

from sqlalchemy import create_engine, text

from tests.integration.cli.conftest import Project


def test_create_list_and_revoke_a_personal_access_token(project: Project) -> None:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    created = project.run(
        "tokens", "create", "--app", "shop:app", "--user", "u-1", "--tenant", "acme",
        "--scopes", "crm:write:*,crm:query:*", "--expires", "90d", "--name", "ci",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("asanoha_pat_") and "\n" not in token
    listed = json.loads(
        project.run("tokens", "list", "--app", "shop:app", "--tenant", "acme").stdout
    )
    [row] = listed["tokens"]
    assert (row["name"], row["user"], row["scopes"]) == (
        "ci",
        "u-1",
        ["crm:query:*", "crm:write:*"],
    )
    assert token not in json.dumps(listed)
    engine = create_engine(project.database.url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT token_hash FROM asanoha_access_tokens")).scalar_one()
    finally:
        engine.dispose()
    assert stored != token and token not in stored
    revoked = project.run("tokens", "revoke", "--app", "shop:app", "--tenant", "acme", row["id"])
    assert revoked.returncode == 0, revoked.stderr
    listed = json.loads(
        project.run("tokens", "list", "--app", "shop:app", "--tenant", "acme").stdout
    )
    assert listed["tokens"][0]["revokedAt"] is not None


def test_a_token_with_the_system_role_is_refused(project: Project) -> None:
    done = project.run(
        "tokens", "create", "--app", "shop:app", "--user", "u-1", "--tenant", "acme",
        "--roles", "Admin,system", "--scopes", "crm:*",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    assert "'system'" in done.stderr and "asanoha_pat_" not in done.stdout


def test_revoke_takes_the_jti_of_a_signed_token(project: Project) -> None:
    import jwt

    assert project.run("migrate", "--app", "shop:app").returncode == 0
    signed = project.run(
        "token", "--app", "shop:app", "--sub", "u-1", "--tenant", "acme", "--roles", "Admin"
    ).stdout.strip()
    jti = jwt.decode(signed, options={"verify_signature": False})["jti"]
    revoked = project.run("tokens", "revoke", "--app", "shop:app", "--tenant", "acme", jti)
    assert revoked.returncode == 0, revoked.stderr
    engine = create_engine(project.database.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tenant_id, jti, revoked_by FROM asanoha_token_revocations")
            ).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [("acme", jti, "cli")]
