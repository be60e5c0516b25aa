"""Revocation across processes: two ``asanoha serve --workers 2`` servers on one database
refuse a revoked personal access token at once, and a revoked signed token within 5 s (on
every worker of both)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest

from asanoha.testing.serving import free_port
from tests.integration.cli.conftest import Project, asanoha_script, project  # noqa: F401

pytestmark = pytest.mark.e2e

STARTUP_TIMEOUT = 60
#: The bound on how long another process may still accept a revoked signed token.
REVOCATION_BOUND = 5.0
LIST = "/api/query/shop:query:note:list"


@contextmanager
def serving(folder: Project) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [asanoha_script(), "serve", "--app", "shop:app", "--port", str(port), "--workers", "2"],
        cwd=folder.folder,
        env=folder.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if httpx.get(f"{base}/health", timeout=1).is_success:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        assert server.poll() is None
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def answers(base: str, token: str) -> set[tuple[int, str | None]]:
    """Status and reason of several calls (spread over the server's two workers)."""
    found = set()
    for _ in range(6):
        response = httpx.post(
            f"{base}{LIST}", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        reason = None if response.is_success else response.json()["error"]["reason"]
        found.add((response.status_code, reason))
    return found


def test_a_revoked_token_is_refused_by_every_api_process(project: Project) -> None:  # noqa: F811
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    created = project.run(
        "tokens", "create", "--app", "shop:app", "--user", "u-1", "--tenant", "acme",
        "--roles", "Admin", "--scopes", "shop:*", "--name", "ci",
    )  # fmt: skip
    pat = created.stdout.strip()
    signed = project.run(
        "token", "--app", "shop:app", "--sub", "u-1", "--tenant", "acme", "--roles", "Admin"
    ).stdout.strip()
    with ExitStack() as servers:
        first, second = (
            servers.enter_context(serving(project)),
            servers.enter_context(serving(project)),
        )
        for base in (first, second):
            assert answers(base, pat) == {(200, None)}
            assert answers(base, signed) == {(200, None)}
        listed = project.run("tokens", "list", "--app", "shop:app", "--tenant", "acme")
        token_id = listed.stdout.split('"id": "')[1].split('"')[0]
        assert (
            project.run(
                "tokens", "revoke", "--app", "shop:app", "--tenant", "acme", token_id
            ).returncode
            == 0
        )
        for base in (first, second):
            assert answers(base, pat) == {(401, "token_revoked")}
        revoked = httpx.post(
            f"{first}/api/auth/revoke", headers={"Authorization": f"Bearer {signed}"}, timeout=10
        )
        assert revoked.status_code == 200
        # The revoking worker refuses it at once; its sibling worker and the other server
        # within the bound (each re-reads the revocations every few seconds).
        deadline = time.monotonic() + REVOCATION_BOUND
        for base in (first, second):
            while answers(base, signed) != {(401, "token_revoked")}:
                assert time.monotonic() < deadline, f"{base} still accepts the revoked token"
                time.sleep(0.2)
