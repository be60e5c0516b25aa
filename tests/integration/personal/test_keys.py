"""Master keys: rotation re-wraps the data keys and changes no ciphertext; a backup taken
before a forget, restored with the key store of after it, no longer opens the values."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.platform.personal import subject_keys
from asanoha.platform.personal.master_keys import (
    LocalKeyWrapper,
    MasterKeyError,
    generate_master_key,
    parse_master_keys,
)
from asanoha.testing import TestUsers
from tests.integration.personal.features import personal
from tests.integration.personal.scan import stored_text
from tests.integration.personal.test_forget import ALICE, BOB, customer_with_everything

ADMIN = TestUsers.admin


def readable(stack: Any, row_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = stack.http.query_ok(
        "personal:query:customer:detail", {"id": row_id}, ADMIN
    )
    return shown


def test_rotation_rewraps_every_key_and_the_old_master_key_can_go(stack: Any) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    old = parse_master_keys(stack.app.settings.master_key)[0]
    before = stored_text(stack)
    new = base64.b64decode(generate_master_key())
    personal = stack.service.personal
    personal.wrapper = LocalKeyWrapper([new, old])
    with stack.db.begin() as conn:
        rotated = subject_keys.rotate(conn, stack.tables, personal.wrapper)
    assert rotated >= 2  # Alice's key and the tenant's blind index key
    after = stored_text(stack)
    # Only the key rows changed: no ciphertext was touched.
    assert {t: v for t, v in after.items() if t != "asanoha_subject_keys"} == {
        t: v for t, v in before.items() if t != "asanoha_subject_keys"
    }
    personal.wrapper = LocalKeyWrapper([new])
    assert readable(stack, alice["id"])["email"] == ALICE["email"]
    found = stack.http.query_ok(
        "personal:query:customer:list", {"filter": {"email": ALICE["email"]}}, ADMIN
    )["rows"]
    assert [row["id"] for row in found] == [alice["id"]]
    # A second rotation has nothing left to do.
    with stack.db.begin() as conn:
        assert subject_keys.rotate(conn, stack.tables, personal.wrapper) == 0


def test_a_master_key_is_32_bytes_of_base64() -> None:
    assert len(parse_master_keys(f"{generate_master_key()}, {generate_master_key()}")) == 2
    for bad in ("not base64!", base64.b64encode(b"short").decode(), " , "):
        with pytest.raises(MasterKeyError):
            parse_master_keys(bad)


def test_asanoha_keys_generate_prints_a_usable_key() -> None:
    result = CliRunner().invoke(cli, ["keys", "generate"])
    assert result.exit_code == 0, result.output
    assert len(parse_master_keys(result.output.strip())) == 1


@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="needs pg_dump and psql")
@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_a_backup_from_before_a_forget_no_longer_opens_the_values(
    stack: Any, asanoha_stack: Any, tmp_path: Any
) -> None:
    """The backup holds the data without the key store; restored beside the key store of
    after the forget, the forgotten customer's values read as forgotten, the others read."""
    alice = customer_with_everything(stack, ALICE, "alice-order")
    bob = customer_with_everything(stack, BOB, "bob-order")
    dump = tmp_path / "backup.sql"
    url = stack.db.engine.url
    env = {**os.environ, "PGHOST": url.host or "127.0.0.1", "PGUSER": url.username or "postgres"}
    subprocess.run(
        [
            "pg_dump",
            "--data-only",
            "--exclude-table-data=asanoha_subject_keys",
            "--exclude-table-data=asanoha_consumers",
            "--exclude-table-data=*alembic_version",
            "-f",
            str(dump),
            stack.database_name,
        ],
        check=True,
        env=env,
    )
    stack.http.write_ok("personal:write:forget-customer", {"id": alice["id"]}, ADMIN)
    keys = stack.tables.subject_keys
    with stack.db.connect() as conn:
        key_rows = [dict(row) for row in conn.execute(select(keys)).mappings()]
    # A new database of the same application, with the backup's data and today's keys.
    restored = asanoha_stack(
        features=[personal],
        database="postgres",
        settings={"master_key": stack.app.settings.master_key},
    )
    subprocess.run(
        ["psql", "-v", "ON_ERROR_STOP=1", "-q", "-f", str(dump), restored.database_name],
        check=True,
        env=env,
    )
    with restored.db.begin() as conn:
        conn.execute(restored.tables.subject_keys.insert(), key_rows)
    assert readable(restored, bob["id"])["email"] == BOB["email"]
    assert (
        restored.http.query_ok("personal:query:customer:detail", {"id": alice["id"]}, ADMIN)[
            "email"
        ]
        == "[forgotten]"
    )


def test_asanoha_keys_rotate_rewraps_under_the_first_key(
    stack: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = customer_with_everything(stack, ALICE, "alice-order")
    old = stack.app.settings.master_key
    new = generate_master_key()
    # A module of this test's own: its App reads the environment set below when imported.
    module = f"rotating_app_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(
        "from asanoha import App\n"
        "from tests.integration.personal.features import personal\n"
        "app = App([personal])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ASANOHA_DATABASE_URL", stack.app.settings.database_url)
    monkeypatch.setenv("ASANOHA_MASTER_KEY", f"{new},{old}")
    result = CliRunner().invoke(cli, ["keys", "rotate", "--app", f"{module}:app"])
    assert result.exit_code == 0, result.output
    assert "re-wrapped" in result.output
    stack.service.personal.wrapper = LocalKeyWrapper.from_text(new)
    assert readable(stack, alice["id"])["email"] == ALICE["email"]
