"""Find the application a command runs: ``--app module:attribute``."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from asanoha.app import App

#: The variable ``--app`` falls back to (Celery's commands read ``APP`` the same way).
APP_VARIABLE = "ASANOHA_APP"
_APP_OPTION = typer.Option(
    "--app",
    envvar=APP_VARIABLE,
    help="The application, as module:attribute (for example shop:app).",
    show_default=False,
    show_envvar=True,
)
#: The ``--app`` option every command but ``demo`` requires: nothing defaults to the demo.
#: Read from ``ASANOHA_APP`` when not given, which ``.env`` may set (``load_env_file``).
AppOption = Annotated[str, _APP_OPTION]
#: The same option where it may be left out: a group whose subcommands take their own
#: (``asanoha migrate``), a command that needs it for some arguments only; ``require_app``.
OptionalAppOption = Annotated[str | None, _APP_OPTION]


def require_app(reference: str | None) -> str:
    """``reference``, or the usage error of a missing ``--app``."""
    if reference is None:
        raise typer.BadParameter(
            f"Missing option '--app' (or {APP_VARIABLE}, in the environment or in .env).",
            param_hint="--app",
        )
    return reference


def put_working_directory_on_path() -> None:
    """Make modules in the current folder importable, as ``uvicorn`` and ``celery -A`` do.

    The ``asanoha`` script's own folder is first on ``sys.path``, not the folder it was run
    from, so without this ``--app shop:app`` next to ``shop.py`` is not found.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def load_app(reference: str) -> App:
    """Import ``package.module:attribute`` and return the ``App`` it names."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise typer.BadParameter(
            f"{reference!r} is not module:attribute (for example shop:app)", param_hint="--app"
        )
    put_working_directory_on_path()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            raise  # the module exists, one of its own imports is missing: show that
        raise typer.BadParameter(
            f"no module named {module_name!r} in {os.getcwd()} or on PYTHONPATH "
            "(run the command from the folder that holds it, or set PYTHONPATH)",
            param_hint="--app",
        ) from exc
    try:
        found = getattr(module, attribute)
    except AttributeError as exc:
        raise typer.BadParameter(
            f"module {module_name!r} has no attribute {attribute!r}", param_hint="--app"
        ) from exc
    # Imported here, not above: every command module imports this one, and ``asanoha --help``
    # imports every command module. The application's module has imported it by now.
    from asanoha.app import App

    if not isinstance(found, App):
        raise typer.BadParameter(
            f"{reference} is a {type(found).__name__}, not an asanoha App", param_hint="--app"
        )
    return found
