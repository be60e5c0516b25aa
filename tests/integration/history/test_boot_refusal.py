"""``asanoha serve`` and ``asanoha worker`` refuse to start on stored events whose version
the code cannot read, naming the event type and the version."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.cli.conftest import Project, project
from tests.integration.cli.test_start_refusals import migrated, start

__all__ = ["migrated", "project"]

#: A note created by a later version of the code (2; this code writes version 1).
STORE_NEWER_EVENT = """
import shop
from asanoha.platform.store import append_event
app = shop.app
with app.database.begin() as conn:
    append_event(conn, app.database.backend, app.service.tables, tenant_id="acme",
                 stream_id="5f0e4a3c-0000-4000-8000-000000000001", stream_type="shop:note",
                 expected_version=0, type="shop:event:note.created", payload={"data": {}},
                 metadata={}, created_by="later-code", schema_version=2)
"""
REFUSAL = (
    "error: the code cannot read stored events: stored events of type "
    "'shop:event:note.created' have version 2, newer than the code's version 1"
)


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_stored_version_the_code_cannot_read_stops_the_start(
    migrated: Project, command: str
) -> None:
    subprocess.run(
        [sys.executable, "-c", STORE_NEWER_EVENT],
        cwd=migrated.folder,
        env=migrated.env(),
        check=True,
        timeout=60,
    )
    refused = start(migrated, command)
    assert refused.returncode == 1, refused.stderr
    assert REFUSAL in refused.stderr
