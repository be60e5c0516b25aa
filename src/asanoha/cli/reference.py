"""The command-line reference of the documentation site, made from the commands themselves.

Every command of ``COMMANDS`` (and each subcommand of a group) with its help text, its
arguments and its options, so the reference cannot drift from what ``--help`` prints.
"""

from __future__ import annotations

from typing import Any

import typer

from asanoha.platform.settings_docs import escape_angle_brackets

# typer may bring a click of its own: commands and parameters are told apart by what they
# have (``list_commands``, ``param_type_name``), not by click's classes.


def command_tree() -> list[tuple[list[str], Any]]:
    """Every command as its words after ``asanoha`` and the click command, groups first."""
    from asanoha.cli import cli

    root: Any = typer.main.get_command(cli)
    found: list[tuple[list[str], Any]] = []
    _walk(root, [], root.context_class(root, info_name="asanoha"), found)
    return found


def _walk(group: Any, words: list[str], ctx: Any, found: list[tuple[list[str], Any]]) -> None:
    if not hasattr(group, "list_commands"):
        return
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = [*words, name]
        found.append((path, command))
        _walk(command, path, command.context_class(command, info_name=name, parent=ctx), found)


def cli_reference() -> str:
    """The Markdown of every command: a heading per command, its help, its parameters."""
    parts: list[str] = []
    for words, command in command_tree():
        level = "#" * min(len(words) + 1, 4)
        parts.append(f"{level} `asanoha {' '.join(words)}`\n")
        if command.help:
            parts.append(_help_text(command.help) + "\n")
        rows = [row for row in map(_parameter_row, command.params) if row is not None]
        if rows:
            parts.append("| parameter | meaning |\n| --- | --- |")
            parts.extend(rows)
            parts.append("")
    return "\n".join(parts)


def _help_text(text: str) -> str:
    """A command's help as Markdown: click's ``\\b`` (keep the lines) marks dropped."""
    lines = [line for line in text.strip().splitlines() if line.strip() != "\b"]
    return escape_angle_brackets("\n".join(lines))


def _parameter_row(param: Any) -> str | None:
    """One table row for an argument or option; ``None`` for what help pages hide."""
    if getattr(param, "hidden", False) or param.name in ("help",):
        return None
    is_option = param.param_type_name == "option"
    if is_option:
        names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    else:
        names = f"`{(param.name or '').upper()}`"
    meaning = str(getattr(param, "help", None) or "")
    envvar = getattr(param, "envvar", None)
    if envvar and getattr(param, "show_envvar", False):
        meaning += f" (env: `{envvar}`)"
    default = param.default
    if (
        is_option
        and not param.is_flag
        and default is not None
        and param.show_default is not False
        and not callable(default)
    ):
        meaning += f" (default: `{default}`)"
    meaning = escape_angle_brackets(" ".join(meaning.split()).replace("|", "\\|"))
    return f"| {names} | {meaning} |"
