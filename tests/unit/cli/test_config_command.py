"""``asanoha config``: every setting with its value and source, secrets masked, and
``--check`` naming each problem on a line of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from asanoha.platform.settings import Settings

SECRET = "a-long-random-secret-for-the-config-command-test"
PERSONAL_APP = """
from asanoha import Access, App, Entity, Feature, fields

feature = Feature("crm")
feature.crud("person", Entity(table="people", fields={"name": fields.text(personal="self")}),
             write=Access(roles=["Editor"]), read=Access(roles=["Editor"]))
app = App(features=[feature])
"""


def config(folder: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "asanoha", "config", *args],
        cwd=folder,
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=60,
    )


def settings_of(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("}\n")
    return {
        item["variable"]: (item["value"], item["source"])
        for item in json.loads(done.stdout)["settings"]
    }


def test_each_value_names_its_source_and_secrets_are_masked(tmp_path: Path) -> None:
    (tmp_path / "crm.py").write_text(PERSONAL_APP, encoding="utf-8")
    (tmp_path / ".env").write_text(
        "ASANOHA_QUEUE_PREFIX=from-file\nASANOHA_JOB_TIMEOUT=99\nASANOHA_APP=crm:app\n",
        encoding="utf-8",
    )
    found = settings_of(
        config(
            tmp_path,
            "--json",
            ASANOHA_JOB_TIMEOUT="120",  # the environment wins over .env
            ASANOHA_JWT_SECRET=SECRET,
            ASANOHA_DATABASE_URL="postgresql://shop:hunter2hunter2@db:5432/shop",
        )
    )
    assert found["ASANOHA_QUEUE_PREFIX"] == ("from-file", ".env")
    assert found["ASANOHA_JOB_TIMEOUT"] == ("120", "environment")
    assert found["ASANOHA_RELAY_INTERVAL"] == ("1", "default")
    assert found["ASANOHA_JWT_SECRET"] == ("***", "environment")
    assert found["ASANOHA_DATABASE_URL"] == ("postgresql://shop:***@db:5432/shop", "environment")
    assert found["ASANOHA_APP"] == ("crm:app", ".env")
    assert found["ASANOHA_MASTER_KEY"] == ("unset", "default")
    # Every setting, and nothing else than the settings and the command line's variables.
    assert {f"ASANOHA_{name.upper()}" for name in Settings.model_fields} <= set(found)
    assert len(found) == len(Settings.model_fields) + 2


def test_the_table_shows_the_same_without_the_secret(tmp_path: Path) -> None:
    done = config(tmp_path, ASANOHA_JWT_SECRET=SECRET)
    assert done.returncode == 0, done.stderr
    assert "ASANOHA_JWT_SECRET" in done.stdout and "***" in done.stdout
    assert SECRET not in done.stdout


def test_check_names_each_problem_on_one_line_and_exits_1(tmp_path: Path) -> None:
    done = config(
        tmp_path,
        "--check",
        ASANOHA_JWT_SECRET="short",
        ASANOHA_MASTER_KEY="not-base64!",
        ASANOHA_JOB_TIMEOUT="3600",
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 3, done.stderr
    assert lines[0].startswith("error: ASANOHA_JWT_SECRET is 5 bytes long")
    assert lines[1].startswith("error: ASANOHA_MASTER_KEY: key 1 is not base64")
    assert lines[2].startswith("error: ASANOHA_JOB_TIMEOUT (3600 s)")


def test_check_names_a_missing_master_key_for_an_app_with_personal_fields(
    tmp_path: Path,
) -> None:
    (tmp_path / "crm.py").write_text(PERSONAL_APP, encoding="utf-8")
    production = {
        "ASANOHA_JWT_SECRET": SECRET,
        "ASANOHA_DATABASE_URL": "postgresql://crm@127.0.0.1:1/crm",
        "ASANOHA_BROKER_URL": "redis://127.0.0.1:1/0",
    }
    done = config(tmp_path, "--check", "--app", "crm:app", **production)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "ASANOHA_MASTER_KEY is not set" in line
    key = "A" * 43 + "="  # base64 of 32 zero bytes
    done = config(tmp_path, "--check", "--app", "crm:app", ASANOHA_MASTER_KEY=key, **production)
    assert (done.returncode, done.stdout, done.stderr) == (0, "no problems found\n", "")


def test_check_passes_on_the_embedded_default_and_refuses_its_placeholder_elsewhere(
    tmp_path: Path,
) -> None:
    done = config(tmp_path, "--check")
    assert (done.returncode, done.stdout, done.stderr) == (0, "no problems found\n", "")
    done = config(tmp_path, "--check", ASANOHA_BROKER_URL="redis://127.0.0.1:1/0")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ASANOHA_JWT_SECRET is not set")


def test_a_value_the_settings_refuse_is_one_line_naming_its_variable(tmp_path: Path) -> None:
    done = config(tmp_path, ASANOHA_JOB_TRIGGER_PARTITIONS="0")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ASANOHA_JOB_TRIGGER_PARTITIONS: ")
    assert "'0'" in line
