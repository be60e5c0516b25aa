"""``asanoha projections``: list the declared projections, and rebuild an entity's table or a
declared projection from its events beside live writes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.listings import JsonOption, print_json, print_table
from asanoha.platform.errors import AsanohaError

if TYPE_CHECKING:
    from asanoha.app import App
    from asanoha.platform.model.projections import ProjectionDef
    from asanoha.platform.store.rebuild import RebuildProgress, RebuildResult

projections = typer.Typer(
    help="Entity tables and declared projections as projections of their events: list, rebuild."
)


@projections.command("list")
def list_projections(app: AppOption, as_json: JsonOption = False) -> None:
    """The declared projections: table, mode, the events they follow, and for an async one
    its consumer's position, lag and status (``asanoha consumers`` operates it)."""
    from asanoha.platform.consumers.projections import describe_projections

    loaded = load_app(app)
    rows = describe_projections(loaded.registry, loaded.consumers.status())
    if as_json:
        print_json({"projections": rows})
        return
    print_table(
        ("projection", "table", "mode", "lag", "status", "follows"),
        (
            (
                row["projection"],
                row["table"],
                row["mode"],
                "" if row["lag"] is None else str(row["lag"]),
                row["status"],
                ", ".join(row["on"]),
            )
            for row in rows
        ),
    )


@projections.command()
def rebuild(
    entity: Annotated[
        str,
        typer.Argument(
            help="The entity, as feature:name (e.g. shop:order), or a declared projection "
            "(e.g. shop:projection:order-totals)."
        ),
    ],
    app: AppOption,
    tenant: Annotated[
        str | None, typer.Option(help="Rebuild only this tenant's rows.", show_default=False)
    ] = None,
    drop_orphans: Annotated[
        bool,
        typer.Option(
            "--drop-orphans", help="Drop live rows that have no events instead of stopping."
        ),
    ] = False,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the rows as they were in <table>__old after the swap."),
    ] = False,
) -> None:
    """Replay the entity's events into a shadow table while writes go on, catch up with the
    writes made meanwhile and swap it in, in one transaction. A live row without events stops
    the rebuild with its id (exit 1; nothing changes) unless --drop-orphans. A declared
    projection (feature.projection) is rebuilt the same way from the events it follows."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from asanoha.platform.store.rebuild import rebuild_guarded

    loaded = load_app(app)
    declared = loaded.registry.find_projection(entity)
    if declared is not None:
        if tenant is not None or drop_orphans or keep:
            raise typer.BadParameter(
                f"{declared.qn} is a declared projection: it is rebuilt whole, without "
                "--tenant, --drop-orphans or --keep"
            )
        _rebuild_declared(loaded, declared)
        return
    entity_def = loaded.registry.find_entity(entity)
    if entity_def is None:
        known = [found.key for found in loaded.registry.entities]
        known += [found.qn for found in loaded.registry.projections]
        raise typer.BadParameter(
            f"no entity or declared projection {entity!r}; the application has: "
            + (", ".join(sorted(known)) or "none")
        )
    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>8,.0f} events/s"),
        TimeRemainingColumn(),
    ) as bar:
        task = bar.add_task(f"rebuilding {entity_def.key}", total=None, rate=0.0)

        def show(progress: RebuildProgress) -> None:
            rate = progress.replayed / max(time.perf_counter() - started, 1e-9)
            bar.update(task, completed=progress.replayed, total=progress.total, rate=rate)

        try:
            result = rebuild_guarded(
                loaded.database,
                loaded.service.tables,
                entity_def,
                tenant_id=tenant,
                drop_orphans=drop_orphans,
                keep=keep,
                progress=show,
            )
        except AsanohaError as error:
            bar.stop()
            typer.echo(f"{error.reason}: {error.message}", err=True)
            raise typer.Exit(1) from None
    typer.echo(_summary(result, time.perf_counter() - started))


def _rebuild_declared(loaded: App, declared: ProjectionDef) -> None:
    from asanoha.platform.consumers.projections import rebuild_projection

    started = time.perf_counter()
    result = rebuild_projection(loaded.database, loaded.service.tables, declared)
    seconds = time.perf_counter() - started
    again = ", replayed again under the lock" if result.restarted else ""
    typer.echo(
        f"rebuilt {result.projection}: {result.replayed:,} events in {seconds:.1f} s, "
        f"{result.caught_up:,} of them written during the rebuild{again}"
    )


def _summary(result: RebuildResult, seconds: float) -> str:
    whose = f" of tenant {result.tenant_id}" if result.tenant_id else ""
    lines = [
        f"rebuilt {result.entity}{whose}: {result.replayed:,} events in {seconds:.1f} s "
        f"({result.replayed / max(seconds, 1e-9):,.0f} events/s), {result.caught_up:,} of them "
        f"written during the rebuild, {result.repaired} stream(s) replayed again"
    ]
    if result.dropped_orphans:
        lines.append(f"dropped {len(result.dropped_orphans)} row(s) without events:")
        lines += [f"  {row_id}" for row_id in result.dropped_orphans]
    if result.kept_table:
        lines.append(f"the rows as they were are kept in {result.kept_table}")
    return "\n".join(lines)
