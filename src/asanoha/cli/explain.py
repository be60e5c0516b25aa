"""``asanoha explain``: what an error reason means, for developers and end users; or, given a
write handler's qualified name, the write plan its calls run."""

from __future__ import annotations

import difflib
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from asanoha.cli.app_loading import APP_VARIABLE, OptionalAppOption, load_app
from asanoha.platform.errors.messages import LANGUAGES, template
from asanoha.platform.errors.reasons import Reasons


def explain(
    reason: Annotated[
        str | None,
        typer.Argument(
            help="An error reason, e.g. role_required (none lists every reason); or a write "
            "handler's qualified name, e.g. shop:write:place-order, for its write plan."
        ),
    ] = None,
    app: OptionalAppOption = None,
) -> None:
    """Show the developer and end-user texts of an error reason in every language, or the
    steps a call of a write handler meets, in order, each with the module that owns it."""
    console = Console()
    if reason is not None and ":" in reason:
        # Reasons are snake_case; qualified names are feature:kind:name.
        typer.echo(_write_plan(reason, app))
        return
    known = [member.value for member in Reasons]
    if reason is None:
        for name in known:
            console.print(name, highlight=False)
        return
    if reason not in known:
        close = difflib.get_close_matches(reason, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise typer.BadParameter(
            f"{reason!r} is not an error reason{hint} (asanoha explain lists them)",
            param_hint="REASON",
        )
    table = Table(title=reason, show_lines=True)
    table.add_column("language")
    table.add_column("developer")
    table.add_column("end user")
    for language in LANGUAGES:
        # Placeholders such as {handler} stay visible: they are filled from the error's details.
        table.add_row(
            language,
            template(reason, "developer", language)[0],
            template(reason, "end_user", language)[0],
        )
    console.print(table, highlight=False)


def _write_plan(qn: str, app: str | None) -> str:
    if app is None:
        raise typer.BadParameter(
            f"{qn} is a handler's name: say which application it belongs to with --app "
            f"module:attribute (or {APP_VARIABLE})",
            param_hint="--app",
        )
    loaded = load_app(app)
    handler = loaded.registry.find_handler(qn)
    if handler is None:
        known = [found.qn for found in loaded.registry.handlers]
        close = difflib.get_close_matches(qn, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise typer.BadParameter(f"{app} has no handler {qn!r}{hint}", param_hint="REASON")
    if handler.kind != "write":
        raise typer.BadParameter(
            f"{qn} is a query handler: queries read and have no write plan", param_hint="REASON"
        )
    return loaded.service.plan_of(handler).describe()
