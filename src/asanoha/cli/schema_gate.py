"""The schema step every command runs at start, and who may change the schema.

``asanoha migrate`` always may; ``serve``, ``worker``, ``mcp`` and ``beat`` only on SQLite
(the embedded default, where nobody else would). On Postgres they check and refuse to start
with the command to run: the schema of a shared database changes once per release, by
``migrate``, not by whichever process happens to start first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from asanoha.app import App
    from asanoha.platform.schema import SchemaUpgrade
    from asanoha.platform.store.migrations import SchemaStatus
    from asanoha.platform.store.upcasting import UnreadableEventVersionError

# The platform is imported inside the functions that use it: ``asanoha --help`` imports
# this module (see ``asanoha.cli``).

__all__ = [
    "DEFAULT_APP_MIGRATIONS",
    "refuse_behind",
    "refuse_unreadable",
    "remedy",
    "require_current_schema",
]

#: ``asanoha.platform.schema.DEFAULT_APP_MIGRATIONS``, the default of ``--migrations``. Not
#: imported from there: the commands that show it are imported by ``asanoha --help``, which
#: should not import the store (see ``asanoha.cli``); a test keeps the two equal.
DEFAULT_APP_MIGRATIONS = Path("migrations")


def require_current_schema(
    app: App, reference: str, app_migrations: Path = DEFAULT_APP_MIGRATIONS
) -> SchemaUpgrade:
    """Bring the schema up to date where this process may (SQLite), else check it; exit
    with the command to run when the database still lacks what the code uses."""
    from asanoha.platform.schema import bring_schema_up_to_date
    from asanoha.platform.store.upcasting import UnreadableEventVersionError

    try:
        upgrade = bring_schema_up_to_date(
            app.registry,
            app.database,
            migrations=app_migrations,
            may_change=app.database.dialect == "sqlite",
        )
    except UnreadableEventVersionError as error:
        refuse_unreadable(error)
    if not upgrade.status.is_current:
        refuse_behind(upgrade.status, reference)
    return upgrade


def refuse_behind(status: SchemaStatus, reference: str) -> NoReturn:
    """Print one line on stderr, what the database lacks and the command to run, and exit 1."""
    lacks = "; ".join(status.problems())
    typer.echo(
        f"error: the database schema is behind the code ({lacks}). {remedy(status, reference)}",
        err=True,
    )
    raise typer.Exit(1)


def refuse_unreadable(error: UnreadableEventVersionError) -> NoReturn:
    """Print which stored event versions the code cannot read on stderr, and exit 1."""
    typer.echo(f"error: the code cannot read stored events: {error}", err=True)
    raise typer.Exit(1)


def remedy(status: SchemaStatus, reference: str) -> str:
    """What to run: ``migrate``, after a revision when existing tables lack columns that no
    migration adds yet."""
    if status.missing_columns and status.app_revision == status.app_head:
        return (
            "Existing tables need new columns: generate a migration with "
            f"'asanoha migrate revision --app {reference} -m \"...\"', review it, then run "
            f"'asanoha migrate --app {reference}'."
        )
    return f"Run 'asanoha migrate --app {reference}' first."
