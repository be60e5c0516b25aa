"""``asanoha explain``: what an error reason means, for developers and end users."""

from __future__ import annotations

import difflib
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from asanoha.platform.errors.messages import LANGUAGES, template
from asanoha.platform.errors.reasons import Reasons


def explain(
    reason: Annotated[
        str | None,
        typer.Argument(help="An error reason, e.g. role_required; none lists every reason."),
    ] = None,
) -> None:
    """Show the developer and end-user texts of an error reason in every language."""
    console = Console()
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
