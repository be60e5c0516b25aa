"""Which revision the code needs and which one a database has, without loading Alembic.

``serve`` and ``worker`` check the schema at every start; Alembic (and Mako, which it loads)
would then stay in the process for nothing: in a worker, in its main process and in each pool
process forked from it. Running migrations still goes through Alembic (``runner.py``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from sqlalchemy import Column, Connection, MetaData, String, Table, inspect, select

PLATFORM_FOLDER = Path(__file__).parent
PLATFORM_VERSION_TABLE = "asanoha_alembic_version"
APP_VERSION_TABLE = "alembic_version"


@functools.cache
def platform_head() -> str:
    """The newest revision of the platform's migrations: the one no other revises."""
    revises: dict[str, object] = {}
    for path in sorted((PLATFORM_FOLDER / "versions").glob("*.py")):
        found = _revision_of(path)
        if found is not None:
            revises[found[0]] = found[1]
    revised = {
        parent
        for down in revises.values()
        for parent in (down if isinstance(down, list | tuple) else [down])
    }
    heads = sorted(set(revises) - revised)
    if len(heads) != 1:
        raise RuntimeError(
            f"the platform migrations in {PLATFORM_FOLDER / 'versions'} have "
            f"{len(heads)} heads ({', '.join(heads) or 'none'}); they must have one"
        )
    return heads[0]


def _revision_of(path: Path) -> tuple[str, object] | None:
    """``(revision, down_revision)`` assigned at the top level of a migration file."""
    values: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                    values[target.id] = ast.literal_eval(node.value)
    revision = values.get("revision")
    return (revision, values.get("down_revision")) if isinstance(revision, str) else None


def database_revision(conn: Connection, version_table: str) -> str | None:
    """The revision recorded in ``version_table``; ``None`` when the table is missing or empty."""
    if not inspect(conn).has_table(version_table):
        return None
    table = Table(version_table, MetaData(), Column("version_num", String(32)))
    found = conn.execute(select(table.c.version_num)).scalars().all()
    if len(found) > 1:
        raise RuntimeError(f"{version_table} holds several revisions: {', '.join(found)}")
    return found[0] if found else None
