"""``asanoha projections rebuild``: an orphan row stops it with its id; --drop-orphans and
--keep."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.cli.conftest import Project, project

__all__ = ["project"]

WRITE_NOTES = (
    "import shop; from asanoha import SessionUser; "
    "[shop.app.service.dispatch_write('shop:write:note:create', {'text': t}, "
    "SessionUser.of('u-1', 'acme', ['Admin'])) for t in ('a', 'b')]"
)
INSERT_ORPHAN = """
import datetime as dt, uuid, shop
from sqlalchemy import insert
now, row_id = dt.datetime.now(dt.UTC), uuid.uuid4()
with shop.app.database.begin() as conn:
    conn.execute(insert(shop.app.service.tables.entity("shop:note")), {
        "id": row_id, "tenant_id": "acme", "version": 1, "created_at": now, "created_by": "sql",
        "modified_at": now, "modified_by": "sql", "text": "orphan"})
print(row_id)
"""


def python(project: Project, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in the project's folder, on its database."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.folder,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_an_orphan_stops_the_rebuild_until_orphans_may_be_dropped(project: Project) -> None:
    assert project.run("migrate", "--app", "shop:app").returncode == 0
    assert python(project, WRITE_NOTES).returncode == 0
    orphan = python(project, INSERT_ORPHAN).stdout.strip()

    stopped = project.run("projections", "rebuild", "shop:note", "--app", "shop:app")
    assert stopped.returncode == 1
    assert stopped.stderr.startswith("projection_orphan_rows: Rebuilding shop:note stopped: 1 row")
    assert orphan in stopped.stderr

    rebuilt = project.run(
        "projections", "rebuild", "shop:note", "--app", "shop:app", "--drop-orphans", "--keep"
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "rebuilt shop:note: 2 events" in rebuilt.stdout
    assert f"dropped 1 row(s) without events:\n  {orphan}" in rebuilt.stdout
    assert "the rows as they were are kept in shop_notes__old" in rebuilt.stdout

    unknown = project.run("projections", "rebuild", "shop:nothing", "--app", "shop:app")
    assert unknown.returncode == 2
    assert "the application has: shop:note" in unknown.stderr
