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


class UnreadableRevisionError(ValueError):
    """A migration file whose revision ids are not plain literals (only Alembic can read it)."""


@functools.cache
def platform_head() -> str:
    """The newest revision of the platform's migrations: the one no other revises."""
    heads = history_heads(PLATFORM_FOLDER / "versions")
    if len(heads) != 1:
        raise RuntimeError(
            f"the platform migrations in {PLATFORM_FOLDER / 'versions'} have "
            f"{len(heads)} heads ({', '.join(heads) or 'none'}); they must have one"
        )
    return heads[0]


def app_head(folder: Path) -> str | None:
    """The newest revision of an application's migrations in ``folder``; ``None`` when the
    folder holds no revision yet (the application's tables are then made from the code)."""
    versions = folder / "versions"
    if not versions.is_dir():
        return None
    try:
        heads = history_heads(versions)
    except UnreadableRevisionError:
        # A hand-written file Alembic can read but a parser cannot: let Alembic read it.
        from alembic.script import ScriptDirectory

        return ScriptDirectory(str(folder)).get_current_head()
    if len(heads) > 1:
        raise RuntimeError(
            f"the migrations in {versions} have {len(heads)} heads ({', '.join(heads)}); "
            "merge them into one (alembic merge)"
        )
    return heads[0] if heads else None


def history_heads(versions: Path) -> list[str]:
    """The revisions of the migration files in ``versions`` that no other file revises."""
    revises: dict[str, object] = {}
    for path in sorted(versions.glob("*.py")):
        found = _revision_of(path)
        if found is not None:
            revises[found[0]] = found[1]
    revised = {
        parent
        for down in revises.values()
        for parent in (down if isinstance(down, list | tuple) else [down])
    }
    return sorted(set(revises) - revised)


def _revision_of(path: Path) -> tuple[str, object] | None:
    """``(revision, down_revision)`` assigned at the top level of a migration file."""
    values: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                    try:
                        values[target.id] = ast.literal_eval(node.value)
                    except ValueError as error:
                        raise UnreadableRevisionError(f"{path}: {target.id}: {error}") from None
    revision = values.get("revision")
    return (revision, values.get("down_revision")) if isinstance(revision, str) else None


def _version_table(name: str) -> Table:
    return Table(name, MetaData(), Column("version_num", String(32), primary_key=True))


def database_revision(conn: Connection, version_table: str) -> str | None:
    """The revision recorded in ``version_table``; ``None`` when the table is missing or empty."""
    if not inspect(conn).has_table(version_table):
        return None
    table = _version_table(version_table)
    found = conn.execute(select(table.c.version_num)).scalars().all()
    if len(found) > 1:
        raise RuntimeError(f"{version_table} holds several revisions: {', '.join(found)}")
    return found[0] if found else None


def record_platform_head(conn: Connection) -> None:
    """Mark the platform tables as at the newest revision (they were just made from the code,
    which the migrations' result equals)."""
    version = _version_table(PLATFORM_VERSION_TABLE)
    version.create(conn, checkfirst=True)
    conn.execute(version.delete())
    conn.execute(version.insert().values(version_num=platform_head()))
