"""``asanoha migrate``: upgrade the schema, print its SQL, check it, write a revision."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, OptionalAppOption, load_app, require_app
from asanoha.cli.schema_gate import (
    DEFAULT_APP_MIGRATIONS,
    refuse_behind,
    refuse_unreadable,
    remedy,
)

migrate = typer.Typer(
    help="Schema migrations (Alembic): the platform's tables and the application's own.",
    invoke_without_command=True,
)

MigrationsOption = Annotated[
    Path,
    typer.Option(
        "--migrations",
        help="The application's migrations folder (env.py, versions/) for its entity tables.",
    ),
]


@migrate.callback()
def upgrade(
    ctx: typer.Context,
    app: OptionalAppOption = None,
    sql: Annotated[
        bool, typer.Option("--sql", help="Print the SQL instead of running it.")
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(help="With --sql: start from this platform revision (default: empty)."),
    ] = None,
    migrations: MigrationsOption = DEFAULT_APP_MIGRATIONS,
) -> None:
    """Upgrade the database: the platform's migrations, then the application's.

    With a migrations folder the application's migrations run; without one, entity tables
    that do not exist yet are created (new columns on existing tables need a revision).
    """
    if ctx.invoked_subcommand is not None:
        return
    app = require_app(app)
    from asanoha.platform.schema import bring_schema_up_to_date
    from asanoha.platform.store.migrations import app_head, app_upgrade_sql, platform_upgrade_sql
    from asanoha.platform.store.upcasting import UnreadableEventVersionError

    loaded = load_app(app)
    if sql:
        typer.echo(platform_upgrade_sql(loaded.database, since), nl=False)
        if app_head(migrations) is not None:
            typer.echo(app_upgrade_sql(migrations, loaded.registry, loaded.database), nl=False)
        return
    try:
        upgrade = bring_schema_up_to_date(
            loaded.registry, loaded.database, migrations=migrations, may_change=True
        )
    except UnreadableEventVersionError as error:
        refuse_unreadable(error)
    status = upgrade.status
    if upgrade.platform_before == status.platform_head:
        typer.echo(f"platform tables: already at revision {status.platform_head}")
    else:
        typer.echo(
            f"platform tables: upgraded from {upgrade.platform_before or 'an empty database'} "
            f"to {status.platform_head}"
        )
    if upgrade.uses_app_migrations:
        typer.echo(f"application tables: migrations in {migrations} applied")
    else:
        typer.echo("application tables: missing entity tables created")
    if not status.is_current:
        refuse_behind(status, app)


@migrate.command()
def check(app: AppOption, migrations: MigrationsOption = DEFAULT_APP_MIGRATIONS) -> None:
    """Exit 1 when the database is behind the code (for deploy pipelines and probes)."""
    from asanoha.platform.store.migrations import schema_status

    loaded = load_app(app)
    status = schema_status(loaded.registry, loaded.database, migrations)
    if status.is_current:
        typer.echo(f"schema is current (platform revision {status.platform_revision})")
        return
    for problem in status.problems():
        typer.echo(f"  - {problem}")
    typer.echo(remedy(status, app))
    raise typer.Exit(1)


@migrate.command()
def revision(
    app: AppOption,
    message: Annotated[
        str, typer.Option("-m", "--message", help="What the migration does.", show_default=False)
    ],
    migrations: MigrationsOption = DEFAULT_APP_MIGRATIONS,
) -> None:
    """Autogenerate a migration of the application's entity tables into its migrations folder.

    The database is compared with the registry: apply the earlier revisions first. The
    first revision creates every entity table (see docs/guides/migrations.md). Review
    the file before applying it (renames appear as a drop and an add). A new field's
    ``default=`` is backfilled into the existing rows; the command says which.
    """
    from asanoha.platform.store.migrations import write_app_revision

    loaded = load_app(app)
    said: list[str] = []
    for path in write_app_revision(migrations, loaded.registry, loaded.database, message, said):
        typer.echo(f"wrote {path}")
    for line in said:
        typer.echo(line)
