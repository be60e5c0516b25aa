"""Commands that start the application refuse signing settings that could not protect a
token: each process exits 1 with a message naming the variable, before it serves anything."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import jwt
import pytest

from asanoha.platform.settings import PLACEHOLDER_JWT_SECRET
from asanoha.testing.stack import broker_url_for_tests
from tests.integration.cli.conftest import Project, asanoha_script
from tests.integration.cli.test_worker_metrics import free_port

#: Each command would run until stopped if it started: long enough to load and refuse.
START_TIMEOUT = 45

COMMANDS = {
    "serve": ["serve", "--app", "shop:app", "--port", "{port}"],
    "mcp-http": ["mcp", "--app", "shop:app", "--transport", "http", "--port", "{port}"],
    "worker": ["worker", "--app", "shop:app", "--concurrency", "1"],
    "beat": ["beat", "--app", "shop:app", "--schedule", "{folder}/beat-schedule"],
}
BAD_SETTINGS = {
    "empty secret": ({"ASANOHA_JWT_SECRET": ""}, "ASANOHA_JWT_SECRET is 0 bytes long"),
    "one-byte secret": ({"ASANOHA_JWT_SECRET": "x"}, "ASANOHA_JWT_SECRET is 1 bytes long"),
    "algorithm none": ({"ASANOHA_JWT_ALGORITHM": "none"}, "ASANOHA_JWT_ALGORITHM is 'none'"),
    "everlasting tokens": (
        {"ASANOHA_JWT_TTL_SECONDS": "100000"},
        "ASANOHA_JWT_TTL_SECONDS is 100000",
    ),
}


@pytest.fixture
def migrated(project: Project) -> Iterator[Project]:
    """The project on a migrated Postgres database and the Redis broker: with good settings,
    every command would start."""
    done = project.run("migrate", "--app", "shop:app")
    assert done.returncode == 0, done.stderr
    yield project


def start(
    project: Project, command: str, **settings: str | None
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with ``settings`` over the project's environment (``None`` unsets one)."""
    env = {
        **project.env(),
        "ASANOHA_BROKER_URL": broker_url_for_tests(),
        "ASANOHA_QUEUE_PREFIX": f"asanoha-refusals-{uuid.uuid4().hex[:8]}",
    }
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    args = [
        arg.format(port=free_port(), folder=project.folder) for arg in COMMANDS.get(command, [])
    ] or command.split()
    return subprocess.run(
        [asanoha_script(), *args],
        cwd=project.folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )


@pytest.mark.parametrize("command", ["serve", "mcp-http"])
def test_the_placeholder_secret_outside_development_refuses_to_start(
    migrated: Project, command: str
) -> None:
    refused = start(migrated, command, ASANOHA_JWT_SECRET=None)
    assert refused.returncode == 1
    assert "ASANOHA_JWT_SECRET is not set" in refused.stderr
    assert "ASANOHA_DEVELOPMENT=true" in refused.stderr
    # No development token holding every role is printed outside development.
    assert "Bearer" not in refused.stdout + refused.stderr


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_mcp_over_stdio_refuses_the_placeholder_secret_outside_development(
    migrated: Project,
) -> None:
    forged = jwt.encode(
        {"sub": "u", "tenant": "t", "roles": ["Admin"], "exp": 2_000_000_000},
        PLACEHOLDER_JWT_SECRET,
        algorithm="HS256",
    )
    refused = start(
        migrated, "mcp --app shop:app", ASANOHA_JWT_SECRET=None, ASANOHA_MCP_TOKEN=forged
    )
    assert refused.returncode == 1
    assert "ASANOHA_JWT_SECRET is not set" in refused.stderr


@pytest.mark.parametrize("bad", list(BAD_SETTINGS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_signing_settings_refuse_to_start(migrated: Project, command: str, bad: str) -> None:
    settings, named = BAD_SETTINGS[bad]
    refused = start(migrated, command, **settings)
    assert refused.returncode == 1, refused.stderr
    assert named in refused.stderr
    assert "Traceback" not in refused.stderr
