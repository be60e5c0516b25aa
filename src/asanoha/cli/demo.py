"""``asanoha demo``: the guided tour of the demo application."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console


def demo(
    workdir: Annotated[
        Path | None, typer.Option(help="Keep the demo database in this folder.")
    ] = None,
) -> None:
    """Run the demo application embedded (SQLite, in-process broker and worker)."""
    from asanoha.handlers.demo.walkthrough import run_walkthrough

    run_walkthrough(Console(), workdir)
