"""``asanoha consumers``: status, run and the operations, from the command line."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.cli.conftest import Project

SHOP_WITH_CONSUMER = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.consumer("audit", on=["shop:event:note.created"], max_attempts=1)
def audit(event, ctx):
    if event.payload["data"]["text"] == "poison":
        raise ValueError("cannot audit a poison note")


app = App([feature])
"""


def test_status_run_and_operations(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_CONSUMER, encoding="utf-8")
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    shown = project.run("consumers", "status", "--app", "shop:app")
    assert shown.returncode == 0, shown.stderr
    assert "shop:consumer:audit" in shown.stdout and "idle" in shown.stdout
    ran = project.run("consumers", "run", "--app", "shop:app")
    assert ran.returncode == 0, ran.stderr
    assert "delivered 0 event(s)" in ran.stdout
    disabled = project.run("consumers", "disable", "shop:consumer:audit", "--app", "shop:app")
    assert disabled.stdout.strip() == "shop:consumer:audit: disabled"
    assert "disabled" in project.run("consumers", "status", "--app", "shop:app").stdout
    refused = project.run("consumers", "skip", "shop:consumer:audit", "--app", "shop:app")
    assert refused.returncode == 1
    assert refused.stderr.startswith("consumer_not_stopped:")


WRITE_POISON = (
    "import shop; from asanoha import SessionUser; "
    "shop.app.service.dispatch_write('shop:write:note:create', {'text': 'poison'}, "
    "SessionUser.of('u-1', 'acme', ['Admin']))"
)
AUDIT = "shop:consumer:audit"


def test_operations_follow_one_rule_and_say_what_they_left(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_CONSUMER, encoding="utf-8")
    assert project.run("migrate", "--app", "shop:app").returncode == 0

    idle = project.run("consumers", "restart", AUDIT, "--app", "shop:app")
    assert idle.returncode == 1
    assert idle.stderr.strip() == (
        f"consumer_not_stopped: Consumer '{AUDIT}' (idle) is not stopped at a failing event; "
        "restart and skip apply to a consumer stopped at one (dead, or waiting for its next "
        "attempt)."
    )
    assert idle.stdout == ""

    written = subprocess.run(
        [sys.executable, "-c", WRITE_POISON],
        cwd=project.folder,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert written.returncode == 0, written.stderr
    assert project.run("consumers", "run", "--app", "shop:app").returncode == 0
    status = project.run("consumers", "status", "--app", "shop:app").stdout
    assert "dead" in status and "cannot audit a poison note" in status

    def said(*args: str) -> str:
        done = project.run("consumers", *args, AUDIT, "--app", "shop:app")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    event = said("disable").removeprefix(f"{AUDIT}: disabled; stopped at event ")
    assert event.isdigit()
    assert said("enable") == f"{AUDIT}: enabled; dead at event {event} (restart or skip it)"
    assert said("restart") == f"{AUDIT}: restarted; tries event {event} now"
    assert said("skip") == f"{AUDIT}: skipped event {event}; idle, lag 0"
