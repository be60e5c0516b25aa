"""``asanoha features``: switch a feature per tenant, set and list configuration, set a
secret from standard input (listed as set, never shown)."""

from __future__ import annotations

import json
import subprocess

import pytest

from asanoha.platform.personal.master_keys import generate_master_key
from tests.integration.cli.conftest import Project, asanoha_script

MAIL = """
from asanoha import Access, App, Feature

feature = Feature("mailer", toggleable=True)
feature.config("sender", default="noreply@example.org")
feature.config("retries", default=3)
feature.secret("smtp_password")
app = App([feature])
"""
SECRET = "pw-cli-4be0d1c9"


@pytest.mark.parametrize("project", ["sqlite"], indirect=True)
def test_features_switches_configures_and_keeps_secrets(project: Project) -> None:
    (project.folder / "mail.py").write_text(MAIL, encoding="utf-8")
    env = {**project.env(), "ASANOHA_MASTER_KEY": generate_master_key()}

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [asanoha_script(), *args, "--app", "mail:app"],
            cwd=project.folder,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert run("migrate").returncode == 0
    disabled = run("features", "disable", "mailer", "--tenant", "t-1")
    assert disabled.returncode == 0, disabled.stderr
    listed = json.loads(run("features", "list", "--tenant", "t-1", "--json").stdout)
    assert listed == {"features": [{"feature": "mailer", "enabled": False}]}

    assert (
        run("features", "config", "set", "mailer.retries", "7", "--tenant", "t-1").returncode == 0
    )
    refused = run("features", "config", "set", "mailer.retries", "many", "--tenant", "t-1")
    assert (refused.returncode, "config_value_invalid" in refused.stderr) == (1, True)
    secret = run(
        "features", "secret", "set", "mailer.smtp_password", "--tenant", "t-1", stdin=SECRET
    )
    assert secret.returncode == 0, secret.stderr

    shown = run("features", "config", "list", "--tenant", "t-1", "--json")
    assert SECRET not in shown.stdout
    document = json.loads(shown.stdout)
    values = {(row["feature"], row["key"]): row["value"] for row in document["config"]}
    assert values[("mailer", "retries")] == 7
    assert values[(None, "tz")] == "UTC"
    assert document["secrets"] == [{"feature": "mailer", "name": "smtp_password", "is_set": True}]

    unknown = run("features", "disable", "shop", "--tenant", "t-1")
    assert unknown.returncode == 1 and "toggleable=True" in unknown.stderr
