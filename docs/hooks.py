"""MkDocs hook: writes the generated parts of the reference pages.

A page holds a marker (``<!-- generated: settings -->``) where the text made from the code
goes: every setting from the ``Settings`` model, every command from the command line, every
error reason from ``errors/i18n/en.yaml``, every name of ``asanoha.__all__``. Nothing there is
copied by hand, so the reference cannot drift from the code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def settings_reference() -> str:
    from asanoha.platform.settings_docs import settings_table

    return settings_table()


def cli_reference() -> str:
    from asanoha.cli.reference import cli_reference as reference

    return reference()


def errors_reference() -> str:
    import asanoha.platform.errors
    from asanoha.platform.settings_docs import escape_angle_brackets

    path = Path(asanoha.platform.errors.__file__).parent / "i18n" / "en.yaml"
    reasons = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = ["| reason | what it means |", "| --- | --- |"]
    for reason, texts in reasons.items():
        developer = escape_angle_brackets(str(texts.get("developer", "")).replace("|", "\\|"))
        rows.append(f"| `{reason}` | {developer} |")
    return "\n".join(rows) + "\n"


def api_reference() -> str:
    import asanoha

    return "\n".join(f"::: asanoha.{name}\n" for name in sorted(asanoha.__all__))


GENERATED = {
    "settings": settings_reference,
    "cli": cli_reference,
    "errors": errors_reference,
    "api": api_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for name, make in GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
