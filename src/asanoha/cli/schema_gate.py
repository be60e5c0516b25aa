"""The start-up schema check of ``serve`` and ``worker``: refuse a database that is behind."""

from __future__ import annotations

from pathlib import Path

import typer

from asanoha.app import App

#: Where ``asanoha migrate`` looks for the application's own migrations by default.
DEFAULT_APP_MIGRATIONS = Path("migrations")


def require_current_schema(
    app: App, reference: str, app_migrations: Path = DEFAULT_APP_MIGRATIONS
) -> None:
    """Exit with the command to run when the database lacks what the code uses.

    On SQLite (the embedded default) the process makes and upgrades its own schema first,
    so that ``asanoha serve`` alone runs; Postgres is changed only by ``asanoha migrate``.
    """
    from asanoha.platform.store.migrations import schema_status

    if app.database.dialect == "sqlite":
        # Upgrading runs Alembic: only the embedded default does it here.
        from asanoha.platform.store.migrations import upgrade_platform

        app.create_schema()
        upgrade_platform(app.database)
    status = schema_status(app.registry, app.database, app_migrations)
    if status.is_current:
        return
    typer.echo("The database schema is behind the code:", err=True)
    for problem in status.problems():
        typer.echo(f"  - {problem}", err=True)
    typer.echo(remedy(status.missing_columns, reference), err=True)
    raise typer.Exit(1)


def remedy(missing_columns: tuple[str, ...], reference: str) -> str:
    """What to run: ``migrate``, after a revision when existing tables lack columns."""
    if missing_columns:
        return (
            "Existing tables need new columns: generate a migration with "
            f"'asanoha migrate revision --app {reference} -m \"...\"', review it, then run "
            f"'asanoha migrate --app {reference}'."
        )
    return f"Run 'asanoha migrate --app {reference}' first."
