"""How listing commands print: a table for people, one JSON document with ``--json``; and
how a command reads its ``--payload``.

A table on a terminal takes the terminal's width; written to a pipe or a file it takes the
width its content needs, so nothing a script reads is cut or wrapped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import typer

#: The ``--json`` option of every listing command.
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document instead of a table.")
]
#: Wide enough for any row: a table only takes the width its content needs.
UNBOUNDED_WIDTH = 100_000


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[str]], *, no_wrap: Sequence[str] = ()
) -> None:
    """Print ``rows`` under ``columns``; the columns named in ``no_wrap`` are never wrapped
    (ids a user copies)."""
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for column in columns:
        table.add_column(column, no_wrap=column in no_wrap, overflow="fold")
    for row in rows:
        table.add_row(*row)
    terminal = sys.stdout.isatty()
    console = Console(width=None if terminal else UNBOUNDED_WIDTH, soft_wrap=not terminal)
    console.print(table, highlight=False)


def payload_option(text: str) -> dict[str, Any]:
    """The ``--payload`` of a command: a JSON object; else one line on stderr and exit 2
    (nothing done)."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError as error:
        typer.echo(f"--payload is not JSON: {error}", err=True)
        raise typer.Exit(2) from None
    if not isinstance(body, dict):
        typer.echo("--payload must be a JSON object ({...})", err=True)
        raise typer.Exit(2)
    return body


def print_json(document: Any) -> None:
    """Print ``document`` as JSON (timestamps as ISO 8601 text, ids as strings)."""
    typer.echo(json.dumps(document, indent=2, default=_plain, ensure_ascii=False))


def _plain(value: Any) -> Any:
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    return str(value)
