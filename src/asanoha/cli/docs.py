"""``asanoha docs``: the documentation site of this checkout, served locally by MkDocs.

The site is built from the repository's ``mkdocs.yml`` and ``docs/`` (the reference pages are
made from the code: settings, commands, error reasons, the Python API), so it needs a checkout
of the repository and the ``dev`` extra, which brings MkDocs and its plugins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

#: The site's configuration: at the root of the checkout that holds ``src/asanoha``. An
#: installed package has no ``mkdocs.yml`` beside it.
SITE_CONFIG = Path(__file__).resolve().parents[3] / "mkdocs.yml"


def docs(
    port: Annotated[int, typer.Option(min=1, max=65535, help="The port to serve on.")] = 8000,
    host: Annotated[str, typer.Option(help="The address to serve on.")] = "127.0.0.1",
) -> None:
    """Serve the documentation site on http://HOST:PORT (`mkdocs serve` on the repository's
    mkdocs.yml); the pages are rebuilt as they are edited. Needs a checkout of the repository
    and the `dev` extra (MkDocs)."""
    try:
        import mkdocs  # noqa: F401  (only whether it is there)
    except ImportError:
        typer.echo(
            "error: mkdocs is not installed: install the dev extra "
            "(pip install -e '.[dev]' in the checkout).",
            err=True,
        )
        raise typer.Exit(1) from None
    if not SITE_CONFIG.is_file():
        typer.echo(
            f"error: no {SITE_CONFIG}: the documentation site is served from a checkout of "
            "the repository (this asanoha is installed without it).",
            err=True,
        )
        raise typer.Exit(1)
    argv = [
        sys.executable,
        "-m",
        "mkdocs",
        "serve",
        "--config-file",
        str(SITE_CONFIG),
        "--dev-addr",
        f"{host}:{port}",
    ]
    sys.stdout.flush()
    sys.stderr.flush()
    # MkDocs takes this process's place: Ctrl-C and a stop signal reach the server itself,
    # and no server is left behind when this command is stopped.
    os.execv(sys.executable, argv)
