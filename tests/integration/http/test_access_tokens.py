"""Personal access tokens and revocation through the HTTP app: a scoped token reaches only
its handlers (403 token_scope_denied, nothing written), never the system role, and an
agent's token is an agent principal; a revoked token answers 401 token_revoked on another
app instance sharing the database and after a restart."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from asanoha import Access, App, Feature, WriteContext
from asanoha.handlers import token_admin
from asanoha.platform.identity.access_tokens import AccessTokenError, AccessTokenStore
from asanoha.platform.model import SYSTEM_ROLE, SessionUser
from asanoha.testing import Stack, TestUsers
from asanoha.testing.http_client import TestClient
from asanoha.testing.plugin import StackFactory
from tests.integration.http.conftest import assert_error
from tests.integration.http.features import catalog, gate

CREATE = "catalog:write:item:create"
LIST = "catalog:query:item:list"
FEATURES = [gate, catalog, token_admin.feature]


@pytest.fixture
def stack(asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=FEATURES)


def store_of(stack: Stack) -> AccessTokenStore:
    store = stack.app.tokens.access_tokens
    assert store is not None
    return store


def listing(client: TestClient, headers: dict[str, str]) -> tuple[int, str | None]:
    """Status and reason of the list query with ``headers``."""
    response = client.post(f"/api/query/{LIST}", json={}, headers=headers)
    if response.status_code == 200:
        return 200, None
    return response.status_code, response.json()["error"]["reason"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_token(stack: Stack, scopes: str, **options: object) -> str:
    return (
        store_of(stack)
        .create(
            tenant_id="tenant-a",
            user_id="u-1",
            name="ci",
            scopes=scopes,
            lifetime=dt.timedelta(days=90),
            created_by="test",
            roles=["Admin"],
            **options,  # type: ignore[arg-type]
        )
        .token
    )


@contextmanager
def another_process(stack: Stack) -> Iterator[TestClient]:
    """A second application on the same database, as another API process (or a restart)."""
    other = App(FEATURES, settings=stack.app.settings, publish_jobs=False)
    try:
        with TestClient(other.http) as client:
            yield client
    finally:
        other.close()


def test_a_token_within_its_scopes_is_admitted(stack: Stack) -> None:
    token = new_token(stack, "catalog:write:*,catalog:query:*")
    created = stack.http.write_ok(CREATE, {"name": "x"}, headers=bearer(token))
    assert created["created_by"] == "u-1"
    assert stack.http.query_ok(LIST, {}, headers=bearer(token))["rows"][0]["name"] == "x"


def test_a_call_outside_the_scopes_is_403_and_writes_nothing(stack: Stack) -> None:
    token = new_token(stack, "catalog:query:*")
    with stack.nothing_written():
        error = stack.http.write_err(CREATE, {"name": "x"}, headers=bearer(token))
    assert_error(error, 403, "access_denied", "token_scope_denied")
    assert error.details["handler"] == CREATE
    with stack.nothing_written():
        error = stack.http.batch_err([(CREATE, {"name": "x"})], headers=bearer(token))
    assert_error(error, 403, "access_denied", "token_scope_denied")


def test_the_stored_hash_is_not_the_token(stack: Stack) -> None:
    token = new_token(stack, "catalog:*")
    assert token.startswith("asanoha_pat_")
    table = stack.app.service.tables.access_tokens
    with stack.app.database.connect() as conn:
        rows = [dict(row) for row in conn.execute(select(table)).mappings()]
    assert len(rows) == 1
    assert token not in repr(rows) and token.removeprefix("asanoha_pat_") not in repr(rows)
    assert len(rows[0]["token_hash"]) == 64


def test_a_token_can_never_hold_the_system_role(stack: Stack) -> None:
    with pytest.raises(AccessTokenError, match="system"):
        store_of(stack).create(
            tenant_id="tenant-a", user_id="u-1", name="x", scopes="consumer-admin:*",
            lifetime=dt.timedelta(days=1), created_by="test", roles=["system"],
        )  # fmt: skip
    with stack.nothing_written():
        error = stack.http.write_err(
            "tokens:write:create",
            {"name": "x", "scopes": ["catalog:*"], "roles": ["system"]},
            TestUsers.admin,
        )
    assert_error(error, 400, "validation_error", error.reason)
    assert error.details["fields"][0]["path"] == "roles"


def test_an_agent_token_is_an_agent_principal(stack: Stack) -> None:
    token = new_token(stack, "catalog:*", agent="ci-agent")
    user = stack.app.tokens.verify(token)
    assert (user.is_agent, user.agent, user.scopes) == (True, "ci-agent", frozenset({"catalog:*"}))


def test_bundled_handlers_create_list_and_revoke_own_tokens(stack: Stack) -> None:
    made = stack.http.write_ok(
        "tokens:write:create", {"name": "ci", "scopes": ["catalog:query:*"]}, TestUsers.user
    )
    assert (made["user"], made["roles"], made["scopes"]) == (
        "user-a",
        ["User"],
        ["catalog:query:*"],
    )
    stack.http.write_ok(
        "tokens:write:create", {"name": "other", "scopes": ["catalog:*"]}, TestUsers.admin
    )
    mine = stack.http.query_ok("tokens:query:list", {}, TestUsers.user)
    assert [row["name"] for row in mine] == ["ci"] and "token" not in mine[0]
    everyone = stack.http.query_ok("tokens:query:list", {}, TestUsers.admin)
    assert sorted(row["name"] for row in everyone) == ["ci", "other"]
    assert stack.http.query_ok(LIST, {}, headers=bearer(made["token"])) is not None
    # Another user of the tenant may not revoke it; its owner may.
    other = stack.http.query_ok("tokens:query:list", {"user": "admin-a"}, TestUsers.admin)
    error = stack.http.write_err("tokens:write:revoke", {"id": other[0]["id"]}, TestUsers.user)
    assert_error(error, 404, "not_found", "token_not_found")
    stack.http.write_ok("tokens:write:revoke", {"id": made["id"]}, TestUsers.user)
    assert listing(stack.http.client, bearer(made["token"])) == (401, "token_revoked")


def test_a_revoked_access_token_is_refused_by_another_process(stack: Stack) -> None:
    token = new_token(stack, "catalog:*")
    jti = stack.app.tokens.verify(token).token_id
    assert jti is not None
    with another_process(stack) as client:
        assert listing(client, bearer(token)) == (200, None)
        store_of(stack).revoke("tenant-a", jti, revoked_by="test")
        assert listing(client, bearer(token)) == (401, "token_revoked")


def test_a_revoked_signed_token_is_refused_here_and_after_a_restart(stack: Stack) -> None:
    headers = stack.http.headers_for(TestUsers.admin)
    assert stack.http.client.post("/api/auth/revoke", headers=headers).json()["data"]["revoked"]
    assert listing(stack.http.client, headers) == (401, "token_revoked")
    with another_process(stack) as client:
        assert listing(client, headers) == (401, "token_revoked")
    # Another token of the same user still works.
    assert stack.http.query_ok(LIST, {}, TestUsers.admin) is not None


def test_only_an_admin_revokes_another_token_of_its_tenant(stack: Stack) -> None:
    victim = stack.http.headers_for(TestUsers.user)
    jti = stack.app.tokens.verify(victim["Authorization"].removeprefix("Bearer ")).token_id
    # An admin of another tenant revokes only in its own tenant: the token still works.
    answer = stack.http.post("/api/auth/revoke", {"jti": jti}, TestUsers.other_tenant)
    assert answer.status_code == 200
    assert listing(stack.http.client, victim) == (200, None)
    other_user = SessionUser.of("user-b", "tenant-a", ["User"])
    denied = stack.http.post("/api/auth/revoke", {"jti": jti}, other_user)
    assert (denied.status_code, denied.json()["error"]["reason"]) == (403, "role_required")
    assert listing(stack.http.client, victim) == (200, None)
    assert stack.http.post("/api/auth/revoke", {"jti": jti}, TestUsers.admin).status_code == 200
    assert listing(stack.http.client, victim) == (401, "token_revoked")


def test_a_malformed_revocation_is_400_and_revokes_nothing(stack: Stack) -> None:
    headers = stack.http.headers_for(TestUsers.admin)
    for body in ({"jti": ""}, {"jti": 7}, {"jti": "a", "other": 1}):
        with stack.nothing_written():
            answer = stack.http.client.post("/api/auth/revoke", json=body, headers=headers)
        assert (answer.status_code, answer.json()["error"]["reason"]) == (400, "validation_failed")
    assert listing(stack.http.client, headers) == (200, None)
    operation = stack.http.client.get("/openapi.json").json()["paths"]["/api/auth/revoke"]["post"]
    assert operation["security"] == [{"bearerAuth": []}]


def test_a_token_made_without_roles_is_granted_its_scopes_only(stack: Stack) -> None:
    token = store_of(stack).create(
        tenant_id="tenant-a", user_id="u-1", name="ci", scopes="catalog:write:item:*",
        lifetime=dt.timedelta(days=1), created_by="test", roles=None,
    ).token  # fmt: skip
    created = stack.http.write_ok(CREATE, {"name": "x"}, headers=bearer(token))
    assert created["created_by"] == "u-1"
    with stack.nothing_written():
        error = stack.http.write_err(
            "instructiongate:write:create-prompt-mid", {"label": "x"}, headers=bearer(token)
        )
    # Outside its scopes: refused as such, although no role of it would reach either.
    assert_error(error, 403, "access_denied", "token_scope_denied")
    assert error.details["handler"] == "instructiongate:write:create-prompt-mid"
    assert listing(stack.http.client, bearer(token)) == (403, "token_scope_denied")
    [row] = store_of(stack).list("tenant-a")
    assert row["roles"] is None


def test_creating_a_token_with_an_idempotency_key_is_refused_and_keeps_nothing(
    stack: Stack,
) -> None:
    # Kept for replays, the answer would hold the new token in plain text.
    keyed = {"Idempotency-Key": "make-ci-token"}
    payload = {"name": "ci", "scopes": ["catalog:query:*"]}
    with stack.nothing_written():
        error = stack.http.write_err("tokens:write:create", payload, TestUsers.user, keyed)
    assert_error(error, 400, "validation_error", "idempotency_key_not_kept")
    assert error.details == {"handler": "tokens:write:create"}
    with stack.nothing_written():
        answer = stack.http.batch([("tokens:write:create", payload)], TestUsers.user, keyed)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["reason"] == "idempotency_key_not_kept"
    # Without a key it is made, and answered once.
    assert stack.http.write_ok("tokens:write:create", payload, TestUsers.user)["token"]


def test_a_token_an_agent_principal_creates_is_an_agent_principals(stack: Stack) -> None:
    from asanoha.platform.http.routes import APPROVAL_HEADER
    from tests.integration.agents.features import ASSISTANT
    from tests.integration.agents.scenario import approve

    payload = {"name": "sub-agent", "scopes": ["catalog:query:*", "agent:write:approve"]}
    approval = approve(stack, payload, "tokens:write:create")["token"]
    made = stack.http.write_ok(
        "tokens:write:create",
        payload,
        ASSISTANT.as_agent("run-1"),
        headers={APPROVAL_HEADER: approval},
    )
    assert made["agent"] == "run-1"
    user = stack.app.tokens.verify(made["token"])
    assert (user.id, user.is_agent, user.agent) == (ASSISTANT.id, True, "run-1")
    # An agent principal never approves, though its scopes name the approving handler.
    with stack.nothing_written():
        error = stack.http.write_err(
            "agent:write:approve",
            {"handler": "catalog:write:item:create", "payload": {"name": "x"},
             "principal": ASSISTANT.id, "channel": "test", "agent_run": "run-1"},
            headers=bearer(made["token"]),
        )  # fmt: skip
    assert (error.http_status, error.reason) == (403, "agent.approver_is_agent")


class Tick(BaseModel):
    label: str


jobs_only = Feature("jobsonly")


@jobs_only.write_handler("tick", access=Access(roles=[SYSTEM_ROLE]))
def tick(payload: Tick, ctx: WriteContext) -> dict[str, str]:
    """A handler only jobs and consumers (the system user) may call."""
    return {"label": payload.label}


def test_a_token_never_reaches_a_system_only_handler(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[*FEATURES, jobs_only])
    for roles in (None, ["Admin"]):
        token = store_of(stack).create(
            tenant_id="tenant-a", user_id="u-1", name="ops", scopes="*",
            lifetime=dt.timedelta(days=1), created_by="test", roles=roles,
        ).token  # fmt: skip
        with stack.nothing_written():
            error = stack.http.write_err(
                "jobsonly:write:tick", {"label": "x"}, headers=bearer(token)
            )
        assert_error(error, 403, "access_denied", "role_required")
        assert error.details["handler"] == "jobsonly:write:tick"
