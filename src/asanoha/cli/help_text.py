"""How ``--help`` reads: value names in capitals as shell users know them (``TEXT``,
``INTEGER``), nothing after a flag, and docstrings as Markdown (paragraphs flow to the
terminal's width, ``code`` is shown as code).

Typer labels every parameter with its Python type (``<str>``, ``<bool>``); a ``metavar`` on
the parameter replaces that label.
"""

from __future__ import annotations

from typing import Any

#: Value names of the Python types the commands take.
_VALUE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "bool": "BOOLEAN"}


def tidy_help(command: Any, markup_mode: str | None, *, subcommands: bool = True) -> None:
    """Name the values of ``command``'s parameters and its ``--help`` (and its subcommands',
    unless told not to), and render their docstrings in ``markup_mode``."""
    command.rich_markup_mode = markup_mode
    params = list(command.params)
    help_option = command.get_help_option(command.context_class(command))
    if help_option is not None:
        params.append(help_option)
    for param in params:
        param.metavar = value_name(param)
        if param.param_type_name == "argument":
            # Typer shows an argument's Python type beside its name whatever its metavar:
            # the name says what to pass.
            param.display_type_rich = _no_type
    if subcommands:
        for sub in getattr(command, "commands", {}).values():
            tidy_help(sub, markup_mode)


def value_name(param: Any) -> str:
    """``""`` for a flag, an argument's own name, the choices of a choice, else the kind of
    value in capitals."""
    if getattr(param, "is_flag", False):
        return ""
    if param.param_type_name == "argument":
        return str(param.name or "value").upper()
    described = getattr(param, "type_descriptor", None)
    if described is not None and described.is_choice:
        return "|".join(str(choice) for choice in described.choices or ())
    bare = param.bare_type() if hasattr(param, "bare_type") else "str"
    if bare.startswith("list["):
        bare = bare[len("list[") : -1]
    return _VALUE_NAMES.get(bare, bare.upper())


def _no_type(ctx: Any) -> None:
    return None
