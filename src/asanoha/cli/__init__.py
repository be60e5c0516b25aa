"""The ``asanoha`` command: one module per command group, registered here.

A command's module is imported only when that command runs (or a help page lists it):
``asanoha worker`` forks its pool from this process, and every module loaded here for
another command (the HTTP server, the MCP server, tables for the terminal) would sit in the
worker's main process and in each pool process.

``asanoha --help`` lists every command with the first line of its help, so it imports every
command module: those import only typer and the light parts of this package at their top,
and the application, the service layer, the store, FastAPI and Celery inside the functions
that use them (or under ``TYPE_CHECKING`` for annotations). ``asanoha`` itself exposes its
public names lazily for the same reason. tests/unit/cli/test_startup_imports.py holds the
list of what ``--help`` must not import.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping, MutableMapping
from importlib.metadata import version
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.models import CommandInfo

from asanoha.cli.app_loading import load_app
from asanoha.cli.failures import DEBUG_VARIABLE, explain, shows_tracebacks
from asanoha.cli.help_text import tidy_help

__all__ = ["COMMANDS", "cli", "load_app", "main"]

#: Every command: its name and where it lives, as ``module:attribute``. The attribute is a
#: command function, or a ``typer.Typer`` for a command group.
COMMANDS: dict[str, str] = {
    "demo": "asanoha.cli.demo:demo",
    "mcp": "asanoha.cli.mcp:mcp",
    "serve": "asanoha.cli.serve:serve",
    "console": "asanoha.cli.console:console",
    "worker": "asanoha.cli.worker:worker",
    "beat": "asanoha.cli.worker:beat",
    "flower": "asanoha.cli.flower:flower",
    "celery": "asanoha.cli.celery_cli:celery",
    "token": "asanoha.cli.tokens:token",
    "tokens": "asanoha.cli.access_tokens:tokens",
    "explain": "asanoha.cli.explain:explain",
    "tools": "asanoha.cli.tools:tools",
    "migrate": "asanoha.cli.migrate:migrate",
    "consumers": "asanoha.cli.consumers:consumers",
    "jobs": "asanoha.cli.jobs:jobs",
    "workflows": "asanoha.cli.workflows:workflows",
    "features": "asanoha.cli.features:features",
    "projections": "asanoha.cli.projections:projections",
    "events": "asanoha.cli.events:events",
    "keys": "asanoha.cli.keys:keys",
    "config": "asanoha.cli.config:config",
    "docs": "asanoha.cli.docs:docs",
}


class LazyCommands(MutableMapping[str, Any]):
    """The root group's commands by name; a command is built from its module on first use."""

    def __init__(self, loaded: Mapping[str, Any], group: TyperGroup) -> None:
        self._loaded: dict[str, Any] = dict(loaded)
        self._group = group

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self._loaded[name] = load_command(name, COMMANDS[name], self._group)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        # The order of COMMANDS is the order of the help page.
        yield from COMMANDS
        yield from (name for name in self._loaded if name not in COMMANDS)

    def __len__(self) -> int:
        return len(self._loaded.keys() | COMMANDS.keys())


class LazyGroup(TyperGroup):
    """The root command group: looks a command up in ``COMMANDS`` when it is asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands, self)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # Its own options, the completion ones typer adds after building it included; each
        # command is tidied when it is loaded.
        tidy_help(self, self.rich_markup_mode, subcommands=False)
        super().format_help(ctx, formatter)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


def load_command(name: str, target: str, group: TyperGroup) -> Any:
    """Import ``target`` (``module:attribute``) and build the click command ``name`` from it."""
    module_name, _, attribute = target.partition(":")
    found = getattr(importlib.import_module(module_name), attribute)
    command: Any
    if isinstance(found, typer.Typer):
        command = typer.main.get_group(found)
    else:
        command = typer.main.get_command_from_info(
            CommandInfo(name=name, callback=found),
            pretty_exceptions_short=cli.pretty_exceptions_short,
            rich_markup_mode=group.rich_markup_mode,
        )
    command.name = name
    tidy_help(command, group.rich_markup_mode)
    return command


cli = typer.Typer(
    cls=LazyGroup,
    help="asanoha: features, event store, service layer and Celery jobs.",
    no_args_is_help=True,
    # Docstrings are Markdown: paragraphs flow to the terminal's width, ``code`` is code.
    rich_markup_mode="markdown",
)


def show_version(value: bool) -> None:
    """Print the installed version and stop (``--version``)."""
    if value:
        typer.echo(f"asanoha {version('asanoha')}")
        raise typer.Exit()


@cli.callback()
def options(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show the full traceback of a failure (also with ASANOHA_DEVELOPMENT=true).",
        ),
    ] = False,
) -> None:
    """asanoha: features, event store, service layer and Celery jobs."""
    # Before the command's own options are read: ASANOHA_APP and the other variables an
    # option falls back to may come from .env, as settings do.
    from asanoha.platform.settings import load_env_file

    load_env_file()
    if debug:
        # In the environment, so processes this command starts show them too.
        os.environ[DEBUG_VARIABLE] = "1"


def main() -> None:
    """Entry point of the ``asanoha`` script: a failure of the surroundings (database, broker,
    settings, the app's declarations) is one line on stderr and exit code 1."""
    try:
        cli()
    except Exception as error:
        failure = None if shows_tracebacks() else explain(error)
        if failure is None:
            raise
        typer.echo(failure.line(), err=True)
        raise SystemExit(1) from None
