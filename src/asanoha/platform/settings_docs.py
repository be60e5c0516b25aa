"""What each setting means, read from the ``#:`` comments above the fields of ``Settings``.

The comments in ``settings.py`` are the one text: the documentation site's settings reference
and ``asanoha config`` are made from them, so neither can drift from the code.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo

from asanoha.platform import settings as settings_module
from asanoha.platform.settings import VARIABLE_PREFIX, Settings


@dataclass(frozen=True)
class SettingDoc:
    """One setting as the reference shows it."""

    name: str  # the field of ``Settings``
    variable: str  # the environment variable
    type: str  # the annotation, as written in the source
    default: str  # the default, as it would be written in the environment
    meaning: str  # the ``#:`` comment above the field, in one paragraph


def variable_of(field: str) -> str:
    """The environment variable of the ``Settings`` field ``field``."""
    return f"{VARIABLE_PREFIX}{field.upper()}"


def default_text(value: Any) -> str:
    """``value`` as one would write it in the environment; ``None`` is unset."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def field_comments() -> dict[str, tuple[str, str]]:
    """Each field of ``Settings`` with its annotation and the ``#:`` comment above it (empty
    when it has none), read from the source of ``settings.py``."""
    source = inspect.getsource(settings_module)
    lines = source.splitlines()
    tree = ast.parse(source)
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == Settings.__name__):
            continue
        for statement in node.body:
            if not (
                isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            ):
                continue
            comment: list[str] = []
            number = statement.lineno - 2  # the line above, counted from 0
            while number >= 0 and lines[number].strip().startswith("#:"):
                comment.insert(0, lines[number].strip()[2:].strip())
                number -= 1
            found[statement.target.id] = (ast.unparse(statement.annotation), " ".join(comment))
    return found


def setting_docs() -> list[SettingDoc]:
    """Every field of ``Settings``, in the order of the class."""
    comments = field_comments()
    docs: list[SettingDoc] = []
    for name, info in Settings.model_fields.items():
        annotation, meaning = comments.get(name, ("", ""))
        docs.append(
            SettingDoc(
                name=name,
                variable=variable_of(name),
                type=annotation,
                default=default_text(default_of(info)),
                meaning=meaning,
            )
        )
    return docs


def default_of(info: FieldInfo) -> Any:
    """The default of a field (none of ``Settings`` has a factory)."""
    return info.get_default(call_default_factory=True)


def settings_table() -> str:
    """The Markdown table of every setting: variable, default, meaning."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for doc in setting_docs():
        meaning = escape_angle_brackets(doc.meaning.replace("|", "\\|").replace("``", "`"))
        rows.append(f"| `{doc.variable}` | `{doc.default}` | {meaning} |")
    return "\n".join(rows) + "\n"


def escape_angle_brackets(text: str) -> str:
    """``text`` with ``<`` and ``>`` outside code spans written as entities, so that Markdown
    shows ``lane:<name>`` instead of taking ``<name>`` for an HTML tag."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):  # the parts outside backticks
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)
