"""Every Python block of the documentation site (``docs/``) runs.

A block is part of a file when its first line names it (``# desk.py``): the blocks of a
page that name the same file are joined in their order and written to a folder of the page.
Scripts run with ``python`` (on SQLite); the ``test_*.py`` files of every page run in one
pytest run, on the real Postgres and Redis the test stack uses. A block that is not meant to run alone
says so with ``<!-- fragment -->`` on the line above it; so does a block that names a file which a
test of its own runs and checks (``tests/integration/test_readme.py``: the longer examples, whose
output it compares), so that this runner does not run it a second time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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
        blocks.append((named.group("name") if named and above != FRAGMENT else None, body))
        index = end + 1
    return blocks


def page_files() -> dict[Path, dict[str, str]]:
    """Each page that holds files: their names and their text, blocks joined in order."""
    found: dict[Path, dict[str, str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for name, body in python_blocks(page):
            if name:
                files = found.setdefault(page, {})
                files[name] = files.get(name, "") + body + "\n"
    return found


def test_every_python_block_is_a_file_or_a_fragment() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    assert pages
    blocks = [block for page in pages for block in python_blocks(page)]
    # The tutorial alone holds six runnable blocks: the runner must have found them.
    assert sum(1 for name, _ in blocks if name) >= 6
    # One test run imports every page's files: a name is one page's only.
    names = [name for files in page_files().values() for name in files]
    assert len(names) == len(set(names)), sorted(names)


def test_the_files_of_every_page_run(tmp_path: Path) -> None:
    """Every page's files in a folder of their own; the scripts (a file with a
    ``__main__`` block, or the files of a page without tests) run with ``python``, then one
    pytest run takes every page's tests."""
    folders: list[Path] = []
    tests: list[str] = []
    expected = 0
    for page, files in page_files().items():
        folder = tmp_path / str(page.relative_to(DOCS).with_suffix("")).replace("/", "-")
        folder.mkdir()
        folders.append(folder)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        page_tests = [name for name in files if name.startswith("test_")]
        tests += [str(folder / name) for name in page_tests]
        expected += sum(files[name].count("\ndef test_") for name in page_tests)
        for name, text in files.items():
            if name.startswith("test_") or (page_tests and "__main__" not in text):
                continue
            ran = run_python(folder, sqlite_env(folder, "docs.sqlite3"), name)
            assert ran.returncode == 0, f"{page.name}: {name}\n{ran.stdout}{ran.stderr}"
    env = sqlite_env(tmp_path, "docs.sqlite3")
    env["PYTHONPATH"] = os.pathsep.join(str(folder) for folder in folders)
    ran = run_python(tmp_path, env, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{expected} passed" in ran.stdout and "skipped" not in ran.stdout, ran.stdout
