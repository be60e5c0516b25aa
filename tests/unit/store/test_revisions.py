"""The start-up schema check reads revisions without Alembic, and reads them as Alembic does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from asanoha.platform.store.migrations import revisions
from asanoha.platform.store.migrations.revisions import PLATFORM_FOLDER, platform_head


def test_the_platform_head_is_alembics_head() -> None:
    assert platform_head() == ScriptDirectory(str(PLATFORM_FOLDER)).get_current_head()


def test_checking_a_schema_does_not_load_alembic() -> None:
    script = (
        "import json, sys\n"
        "from asanoha.platform.store.migrations import platform_head, schema_status\n"
        "platform_head()\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    output = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(json.loads(output.splitlines()[-1]))
    assert not {name for name in loaded if name.split(".")[0] in ("alembic", "mako")}


def test_a_history_with_two_heads_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = tmp_path / "versions"
    versions.mkdir()
    for name, down in (("0001", None), ("0002", "0001"), ("0003", "0001")):
        (versions / f"{name}_x.py").write_text(
            f"revision: str = {name!r}\ndown_revision = {down!r}\n", encoding="utf-8"
        )
    monkeypatch.setattr(revisions, "PLATFORM_FOLDER", tmp_path)
    revisions.platform_head.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="2 heads"):
            revisions.platform_head()
    finally:
        revisions.platform_head.cache_clear()


def write_history(versions: Path, revisions: dict[str, str | None]) -> None:
    versions.mkdir(parents=True, exist_ok=True)
    for name, down in revisions.items():
        (versions / f"{name}_x.py").write_text(
            f"revision: str = {name!r}\ndown_revision: str | None = {down!r}\n", encoding="utf-8"
        )


def test_an_application_head_is_read_as_alembic_reads_it(tmp_path: Path) -> None:
    assert revisions.app_head(tmp_path / "missing") is None
    (tmp_path / "versions").mkdir()
    assert revisions.app_head(tmp_path) is None  # a folder without revisions yet
    write_history(tmp_path / "versions", {"a1": None, "b2": "a1", "c3": "b2"})
    (tmp_path / "script.py.mako").write_text("", encoding="utf-8")
    assert revisions.app_head(tmp_path) == "c3"
    assert ScriptDirectory(str(tmp_path)).get_current_head() == "c3"


def test_a_revision_only_alembic_can_read_is_read_by_alembic(tmp_path: Path) -> None:
    write_history(tmp_path / "versions", {"a1": None})
    (tmp_path / "versions" / "b2_x.py").write_text(
        "REVISION = 'b2'\nrevision = REVISION\ndown_revision = 'a1'\n", encoding="utf-8"
    )
    (tmp_path / "script.py.mako").write_text("", encoding="utf-8")
    assert revisions.app_head(tmp_path) == "b2"
