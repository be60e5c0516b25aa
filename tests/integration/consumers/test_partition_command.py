"""``asanoha consumers`` on a partitioned consumer: status lists each partition, an
operation takes --partition, and repartition changes the number."""

from __future__ import annotations

import pytest

from tests.integration.cli.conftest import Project
from tests.integration.cli.conftest import project as project  # the fixture, re-exported

SHOP = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.consumer("audit", on=["shop:event:note.created"], partitions=3)
def audit(event, ctx):
    pass


app = App([feature])
"""
AUDIT = "shop:consumer:audit"


@pytest.mark.parametrize("project", ["sqlite"], indirect=True)
def test_status_partition_operations_and_repartition(project: Project) -> None:
    (project.folder / "shop.py").write_text(SHOP, encoding="utf-8")
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    shown = project.run("consumers", "status", "--app", "shop:app")
    assert shown.returncode == 0, shown.stderr
    for name in (AUDIT, f"{AUDIT}#0", f"{AUDIT}#1", f"{AUDIT}#2"):
        assert name in shown.stdout
    disabled = project.run("consumers", "disable", AUDIT, "--partition", "2", "--app", "shop:app")
    assert disabled.returncode == 0, disabled.stderr
    missing = project.run("consumers", "enable", AUDIT, "--partition", "3", "--app", "shop:app")
    assert missing.returncode == 1
    assert missing.stderr.startswith("consumer_partition_not_found:")
    changed = project.run("consumers", "repartition", AUDIT, "5", "--app", "shop:app")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.startswith(f"{AUDIT}: 3 -> 5 partition(s)")
    assert f"{AUDIT}#4" in project.run("consumers", "status", "--app", "shop:app").stdout
