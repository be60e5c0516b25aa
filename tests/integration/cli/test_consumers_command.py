"""``asanoha consumers``: status, run and the operations, from the command line."""

from __future__ import annotations

from tests.integration.cli.conftest import Project

SHOP_WITH_CONSUMER = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.consumer("audit", on=["shop:event:note.created"])
def audit(event, ctx):
    return None


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
