"""The README's example and the site's longer examples work as written.

The README holds one example (``shop.py``), run here. The site's pages hold examples whose
output these tests compare (the quickstart, the handler API, fields, aggregates, feature
configuration, workflows, the MCP client, the token commands); the pages mark them
``<!-- fragment -->`` so that ``test_docs_examples.py``, which runs every other block, does not
run them a second time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.pool import NullPool

from asanoha import SessionUser
from tests.integration.cli.test_worker_metrics import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
QUICKSTART = DOCS / "tutorial" / "quickstart.md"

#: The named blocks that the pages mark as fragments, and the test that runs each.
RUN_HERE = {
    ("tutorial/quickstart.md", "shop.py"): "test_quickstart_declares_calls_and_tests",
    (
        "guides/agents.md",
        "agent_client.py",
    ): "test_agents_example_runs_an_mcp_session_with_an_approval",
    ("guides/handlers.md", "notes.py"): "test_build_on_it_example_runs_as_written",
    ("guides/entities.md", "orders.py"): "test_fields_example_runs_as_written",
    ("guides/aggregates.md", "accounts.py"): "test_aggregates_example_runs_as_written",
    (
        "guides/feature-settings.md",
        "mailer.py",
    ): "test_feature_configuration_example_runs_as_written",
    ("guides/workflows.md", "test_onboard.py"): "test_workflows_example_runs_as_written",
    ("guides/workflows.md", "test_totals.py"): "test_canvas_example_runs_as_written",
    ("guides/workflows.md", "test_invoice.py"): "test_waits_example_runs_as_written",
    ("guides/live-updates.md", "board.py"): "feed/test_stream_handlers.py",
}


def python_blocks(page: Path = QUICKSTART) -> list[str]:
    """The ``python`` blocks of a page of the site (or of the README), in order."""
    text = page.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def named_block(page: str, name: str) -> str:
    """The block of ``docs/<page>`` whose first line names the file ``name``."""
    blocks = python_blocks(DOCS / page)
    found = [block for block in blocks if re.match(rf"# {re.escape(name)}\b", block)]
    assert len(found) == 1, f"docs/{page}: one block starting '# {name}', found {len(found)}"
    return found[0]


def test_every_named_fragment_of_the_site_is_run_by_a_test() -> None:
    """A block that names a file but is marked a fragment is skipped by the generic runner:
    each must be one this module (or the feed tests) runs."""
    marked = set()
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for name in re.findall(r"^<!-- fragment -->\n```python\n# (\w+\.py)\b", text, re.M):
            marked.add((str(page.relative_to(DOCS)), name))
    assert marked == set(RUN_HERE)


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    (example,) = python_blocks(README)
    assert example.startswith("# shop.py\n")
    assert 30 <= len(example.splitlines()) <= 50
    (tmp_path / "shop.py").write_text(example, encoding="utf-8")
    env = sqlite_env(tmp_path, "shop.sqlite3")
    ran = run_python(tmp_path, env, "shop.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == ["hi 1", "instruction_field_write_requires_high_risk"]
    # The create wrote its row and its job row; the refused call wrote nothing.
    engine = create_engine(env["ASANOHA_DATABASE_URL"], poolclass=NullPool)
    try:
        with engine.connect() as conn:
            labels = conn.execute(text("SELECT label FROM prompts")).scalars().all()
            jobs = conn.execute(text("SELECT job_qn FROM asanoha_outbox")).scalars().all()
    finally:
        engine.dispose()
    assert (labels, jobs) == (["hi"], ["prompts:job:notify"])


def sqlite_env(folder: Path, database: str) -> dict[str, str]:
    """The environment of an example script in ``folder``: importable there, on SQLite."""
    return {
        **os.environ,
        "PYTHONPATH": str(folder),
        "ASANOHA_DATABASE_URL": f"sqlite+pysqlite:///{folder / database}",
    }


def run_python(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``folder`` with ``env``."""
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


def test_quickstart_declares_calls_and_tests(tmp_path: Path) -> None:
    declare, call, tests = python_blocks()[:3]
    (tmp_path / "shop.py").write_text(declare, encoding="utf-8")
    (tmp_path / "call.py").write_text(
        "from asanoha import AccessDeniedError\ntry:\n"
        + "".join(f"    {line}\n" for line in call.splitlines())
        + "except AccessDeniedError as error:\n    print('denied', error.reason)\n",
        encoding="utf-8",
    )
    (tmp_path / "test_shop.py").write_text(tests, encoding="utf-8")
    env = sqlite_env(tmp_path, "shop.sqlite3")
    called = run_python(tmp_path, env, "call.py")
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "denied instruction_field_write_requires_high_risk"
    tested = run_python(
        tmp_path, env, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout


def test_agents_example_runs_an_mcp_session_with_an_approval(tmp_path: Path) -> None:
    declare = named_block("tutorial/quickstart.md", "shop.py")
    client = named_block("guides/agents.md", "agent_client.py")
    (tmp_path / "shop.py").write_text(declare, encoding="utf-8")
    (tmp_path / "agent_client.py").write_text(client, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "ASANOHA_DATABASE_URL": f"sqlite+pysqlite:///{tmp_path / 'shop.sqlite3'}",
        "ASANOHA_JWT_SECRET": "a-long-random-secret-for-the-agents-example",
    }
    ran = subprocess.run(
        [sys.executable, "agent_client.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert "agent.approval_required" in lines
    assert "created tone" in lines
    assert "trust trusted" in lines
    assert any(line.startswith("prompts:write:prompt:create") for line in lines)

    # The token the example hands the agent marks an agent principal, and the approver is
    # another principal.
    claims_of = client.replace(
        "anyio.run(main)",
        "import jwt\n"
        "claims = jwt.decode(server.env['ASANOHA_MCP_TOKEN'], options={'verify_signature': False})\n"
        "print(claims['sub'], claims['agent'], human.id)",
    )
    (tmp_path / "claims.py").write_text(claims_of, encoding="utf-8")
    claims = subprocess.run(
        [sys.executable, "claims.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert claims.returncode == 0, claims.stdout + claims.stderr
    subject, agent_run, approver = claims.stdout.split()
    assert agent_run and approver != subject


TOKENS = DOCS / "guides" / "tokens.md"


def shell_block(heading: str) -> str:
    """The ``bash`` block that follows ``heading`` in the tokens guide."""
    text = TOKENS.read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    found = re.search(r"```bash\n(.*?)```", after, flags=re.DOTALL)
    assert found is not None, f"no bash block after {heading!r}"
    return found.group(1)


def test_tokens_example_writes_over_http_and_its_job_runs(tmp_path: Path) -> None:
    """The *Bearer tokens* block, run by bash against ``asanoha serve --app shop:app`` on the
    quickstart's ``shop.py``, as the tokens guide says to start it (with the block's secret).

    Two substitutions, and only these: the server listens on a free port instead of 8000
    (the block's ``127.0.0.1:8000`` is replaced by it), and ``curl`` is wrapped so that it
    also prints the HTTP status.
    """
    block = shell_block("## Bearer tokens")
    secret = re.search(r"^export ASANOHA_JWT_SECRET=(\S+)$", block, flags=re.MULTILINE)
    assert secret is not None, block
    assert "127.0.0.1:8000" in block
    guide = TOKENS.read_text(encoding="utf-8")
    # The command the guide gives to start the API, with the block's secret.
    serve = f"`ASANOHA_JWT_SECRET={secret.group(1)} asanoha serve --app shop:app`"
    assert serve in guide
    (tmp_path / "shop.py").write_text(
        named_block("tutorial/quickstart.md", "shop.py"), encoding="utf-8"
    )
    database = tmp_path / "shop.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ASANOHA_DATABASE_URL"] = f"sqlite+pysqlite:///{database}"
    port = free_port()
    server = subprocess.Popen(
        ["asanoha", "serve", "--app", "shop:app", "--port", str(port)],
        cwd=tmp_path,
        env={**env, "ASANOHA_JWT_SECRET": secret.group(1)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", server)
        script = (
            "set -euo pipefail\n"
            "curl() { command curl --silent --show-error --write-out '\\nHTTP %{http_code}\\n' \"$@\"; }\n"
            + block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        )
        ran = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        body, status = ran.stdout.rstrip("\n").rsplit("\n", 1)
        assert status == "HTTP 200", ran.stdout
        answer = json.loads(body)
        assert answer["isSuccess"] is True
        assert answer["data"]["label"] == "hi"
        # serve on the embedded default runs the jobs too: the create's notify job ran.
        engine = create_engine(f"sqlite+pysqlite:///{database}", poolclass=NullPool)
        try:
            with engine.connect() as conn:
                labels = conn.execute(text("SELECT label FROM prompts")).scalars().all()
            assert labels == ["hi"]
            assert wait_for_job_state(engine, "prompts:job:notify", server) == "succeeded"
        finally:
            engine.dispose()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)


def wait_until_healthy(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "asanoha serve exited"
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{base}/health did not answer within 60 s")


def wait_for_job_state(engine: Engine, job_qn: str, server: subprocess.Popen[bytes]) -> str:
    """The state of the job row of ``job_qn`` once it is finished (or after 60 s)."""
    query = text("SELECT state FROM asanoha_outbox WHERE job_qn = :qn")
    deadline = time.monotonic() + 60
    state = "missing"
    while time.monotonic() < deadline and server.poll() is None:
        with engine.connect() as conn:
            state = conn.execute(query, {"qn": job_qn}).scalar_one_or_none() or "missing"
        if state in ("succeeded", "failed"):
            break
        time.sleep(0.1)
    return state


def test_build_on_it_example_runs_as_written(tmp_path: Path) -> None:
    example = named_block("guides/handlers.md", "notes.py")
    (tmp_path / "notes.py").write_text(example, encoding="utf-8")
    env = sqlite_env(tmp_path, "notes.sqlite3")
    ran = run_python(tmp_path, env, "notes.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == ["['Ada']", "['Bob']"]
    # The events the guide describes, with the payload shapes it gives.
    engine = create_engine(env["ASANOHA_DATABASE_URL"], poolclass=NullPool)
    with engine.connect() as conn:
        events = conn.execute(text("SELECT type, payload FROM asanoha_events ORDER BY id")).all()
    engine.dispose()
    shapes = [(type_, sorted(json.loads(payload))) for type_, payload in events]
    assert shapes == [
        # Ada's e-mail is personal and filterable: its blind index is the row's, not the event's.
        ("crm:event:customer.created", ["data"]),
        ("crm:event:customer.created", ["data"]),
        ("crm:event:customer.updated", ["changes"]),
        ("crm:event:upgraded", ["plan", "seats"]),
    ]


def test_aggregates_example_runs_as_written(tmp_path: Path) -> None:
    example = named_block("guides/aggregates.md", "accounts.py")
    (tmp_path / "accounts.py").write_text(example, encoding="utf-8")
    ran = run_python(tmp_path, sqlite_env(tmp_path, "accounts.sqlite3"), "accounts.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == ["{'balance': 30}", "[('acc-1', 30)]"]


def test_build_on_it_job_writes_through_a_handler_that_admits_system(asanoha_stack: Any) -> None:
    example = named_block("guides/handlers.md", "notes.py")
    namespace: dict[str, Any] = {"__name__": "readme_notes"}
    exec(compile(example, "notes.py", "exec"), namespace)
    stack = asanoha_stack(features=[namespace["feature"]], jobs=True)
    editor = SessionUser.of("u-1", tenant_id="acme", roles=["Editor"])
    row = stack.http.write_ok("crm:write:customer:create", {"name": "Ada"}, editor)
    stack.http.write_ok("crm:write:upgrade", {"id": str(row["id"]), "seats": 5}, editor)
    stack.drain()  # raises if the welcome job failed
    with stack.db.connect() as conn:
        states = conn.execute(
            select(stack.tables.outbox.c.job_qn, stack.tables.outbox.c.state)
        ).all()
    assert [tuple(s) for s in states] == [("crm:job:welcome", "succeeded")]


def test_fields_example_runs_as_written(tmp_path: Path) -> None:
    example = named_block("guides/entities.md", "orders.py")
    (tmp_path / "orders.py").write_text(example, encoding="utf-8")
    ran = run_python(tmp_path, sqlite_env(tmp_path, "orders.sqlite3"), "orders.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [
        "{'amount': '9.50', 'currency': 'EUR'} 2026-07-01T07:00:00+00:00",
        "True",
        "field_rule_failed lines.0.qty",
        "field_rule_failed contact",
        "delete_restricted shop:order",
    ]


def test_feature_configuration_example_runs_as_written(tmp_path: Path) -> None:
    example = named_block("guides/feature-settings.md", "mailer.py")
    (tmp_path / "mailer.py").write_text(example, encoding="utf-8")
    ran = run_python(tmp_path, sqlite_env(tmp_path, "mailer.sqlite3"), "mailer.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    secret_set, sent = ran.stdout.splitlines()
    assert secret_set == "{'feature': 'mailer', 'name': 'smtp_password', 'is_set': True}"
    assert sent.startswith(
        "{'sender': 'hi@acme.test', 'has_password': True, 'locale': 'en', 'sent_at': 'CE"
    )


def test_workflows_example_runs_as_written(tmp_path: Path) -> None:
    _run_example_test(tmp_path, "guides/workflows.md", "test_onboard.py")


def test_canvas_example_runs_as_written(tmp_path: Path) -> None:
    _run_example_test(tmp_path, "guides/workflows.md", "test_totals.py")


def test_waits_example_runs_as_written(tmp_path: Path) -> None:
    _run_example_test(tmp_path, "guides/workflows.md", "test_invoice.py")


def _run_example_test(tmp_path: Path, page: str, name: str) -> None:
    """Run the test file ``name`` that ``docs/<page>`` shows with pytest, as written."""
    example = named_block(page, name)
    (tmp_path / name).write_text(example, encoding="utf-8")
    tested = run_python(
        tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path)}, "-m", "pytest", "-q",
        "-p", "no:cacheprovider", name,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
