"""A rate limit is one count for the whole application: 30 calls spread over two
``asanoha serve --workers 2`` (four processes) at 20/minute admit exactly 20."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.testing.stack import broker_url_for_tests
from tests.integration.cli.conftest import Project, asanoha_script
from tests.integration.cli.conftest import project as project
from tests.integration.cli.test_worker_metrics import free_port

STARTUP_TIMEOUT = 60
QN = "board:write:note:post"

BOARD = """
from pydantic import BaseModel

from asanoha import Access, App, Entity, Feature, RateLimit, fields

feature = Feature("board")
feature.entity(
    "note", Entity(table="board_notes", fields={"text": fields.text(personal=False, reason="x")})
)


class Post(BaseModel):
    text: str


@feature.write_handler(
    "note:post",
    access=Access(public="a guest book"),
    rate_limit=RateLimit("20/minute", per="ip"),
)
def post(payload: Post, ctx):
    return ctx.entity("note").create({"text": payload.text})


app = App([feature])
"""


@pytest.fixture
def servers(project: Project) -> Iterator[list[int]]:
    (project.folder / "board.py").write_text(BOARD, encoding="utf-8")
    env = {
        **project.env(),
        # The test Redis, and a key prefix of this test alone.
        "ASANOHA_RATE_LIMIT_URL": broker_url_for_tests(),
        "ASANOHA_QUEUE_PREFIX": f"asanoha-rl-{uuid.uuid4().hex[:12]}",
    }
    migrated = subprocess.run(
        [asanoha_script(), "migrate", "--app", "board:app"],
        cwd=project.folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrated.returncode == 0, migrated.stderr
    ports = [free_port(), free_port()]
    processes = [
        subprocess.Popen(
            [*serve_command(port), "--workers", "2"],
            cwd=project.folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_until_serving(port, process)
        yield ports
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def serve_command(port: int) -> list[str]:
    return [asanoha_script(), "serve", "--app", "board:app", "--port", str(port)]


def wait_until_serving(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, "asanoha serve ended before it served"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"asanoha serve on port {port} did not answer /health")


def test_thirty_calls_over_two_servers_admit_exactly_the_limit(
    servers: list[int],
    project: Project,
) -> None:
    def call(n: int) -> httpx.Response:
        port = servers[n % 2]
        return httpx.post(
            f"http://127.0.0.1:{port}/api/write/{QN}", json={"text": f"note {n}"}, timeout=30
        )

    # Separate connections, so the calls reach both worker processes of each server.
    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = list(pool.map(call, range(30)))
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] * 20 + [429] * 10, statuses
    for refused in (r for r in responses if r.status_code == 429):
        assert refused.json()["error"]["reason"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # A refused call wrote nothing.
    engine = create_engine(project.database.url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM board_notes")).scalar_one() == 20
    finally:
        engine.dispose()
