"""Every Python block of the documentation site (``docs/``) runs.

A block is part of a file when its first line names it (``# desk.py``): the blocks of a
page that name the same file are joined in their order, written to a folder of their own,
and run: each file with ``python`` (on SQLite), then the ``test_*.py`` files with pytest
(on the real Postgres and Redis the test stack uses). A block that is not meant to run alone
says so with ``<!-- fragment -->`` on the line above it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.test_readme import ROOT, run_python, sqlite_env

DOCS = ROOT / "docs"
FRAGMENT = "<!-- fragment -->"
FILE_LINE = re.compile(r"^# (?P<name>\w+\.py)\b")


def python_blocks(page: Path) -> list[tuple[str | None, str]]:
    """Each ``python`` block of ``page``: the file it is part of (``None``: a fragment)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[tuple[str | None, str]] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() != "```python":
            index += 1
            continue
        above = lines[index - 1].strip() if index else ""
        end = lines.index("```", index + 1)
        body = "\n".join(lines[index + 1 : end]) + "\n"
        named = FILE_LINE.match(body)
        assert named or above == FRAGMENT, (
            f"{page.relative_to(ROOT)}:{index + 1}: a python block starts with '# <file>.py' "
            f"or follows a '{FRAGMENT}' line"
        )
        blocks.append((named.group("name") if named else None, body))
        index = end + 1
    return blocks


def pages_with_files() -> list[Path]:
    return [
        page for page in sorted(DOCS.rglob("*.md")) if any(name for name, _ in python_blocks(page))
    ]


def test_every_python_block_is_a_file_or_a_fragment() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    assert pages
    blocks = [block for page in pages for block in python_blocks(page)]
    # The tutorial alone holds six runnable blocks: the runner must have found them.
    assert sum(1 for name, _ in blocks if name) >= 6


@pytest.mark.parametrize("page", pages_with_files(), ids=lambda page: str(page.relative_to(DOCS)))
def test_the_files_of_a_page_run(page: Path, tmp_path: Path) -> None:
    files: dict[str, str] = {}
    for name, body in python_blocks(page):
        if name:
            files[name] = files.get(name, "") + body + "\n"
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = sqlite_env(tmp_path, "docs.sqlite3")
    for name in files:
        if not name.startswith("test_"):
            ran = run_python(tmp_path, env, name)
            assert ran.returncode == 0, f"{page.name}: {name}\n{ran.stdout}{ran.stderr}"
    tests = [name for name in files if name.startswith("test_")]
    if tests:
        ran = run_python(tmp_path, env, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)
        assert ran.returncode == 0, f"{page.name}\n{ran.stdout}{ran.stderr}"
        assert " passed" in ran.stdout and "skipped" not in ran.stdout, ran.stdout
