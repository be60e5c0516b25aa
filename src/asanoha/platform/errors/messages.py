"""Translated texts for every reason, loaded once from ``i18n/<language>.yaml``."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

from asanoha.platform.errors.reasons import Reasons

LANGUAGES = ("en", "de")
_I18N = Path(__file__).with_name("i18n")

Audience = Literal["end_user", "developer"]


@functools.cache
def load_catalogue(language: str) -> dict[str, dict[str, str]]:
    """The ``reason -> {end_user, developer}`` table of one language."""
    # Imported with the first text read: every command imports the errors, few read a text.
    import yaml

    with (_I18N / f"{language}.yaml").open(encoding="utf-8") as handle:
        data: dict[str, dict[str, str]] = yaml.safe_load(handle)
    return data


# Only plain ``{name}`` placeholders: no attribute access, indexing or format specs, so a
# template can never reach into a detail's internals.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What stands for a detail the raising code did not supply.
_UNKNOWN = {"en": "(unknown)", "de": "(unbekannt)"}


def fill(template: str, details: dict[str, Any], language: str = "en") -> str:
    """``template`` with each ``{name}`` replaced by ``str(details[name])``.

    A detail that is missing reads "(unknown)" instead of leaving ``{name}`` in the text.
    """
    unknown = _UNKNOWN.get(language, _UNKNOWN["en"])

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(details[name]) if name in details else unknown

    return _PLACEHOLDER.sub(value, template)


def template(reason: Reasons | str, audience: Audience, language: str) -> tuple[str, str]:
    """The unfilled text for ``reason`` and the language it is in (English when the
    language or its entry is unknown); the reason itself when no catalogue has it."""
    language = language if language in LANGUAGES else "en"
    entry = load_catalogue(language).get(str(reason))
    if entry is None:
        entry, language = load_catalogue("en").get(str(reason)), "en"
    if entry is None:
        return str(reason), language
    return entry[audience], language


def render(
    reason: Reasons | str, details: dict[str, Any], audience: Audience, language: str
) -> str:
    """The text for ``reason`` in ``language`` (English when unknown), filled from ``details``."""
    text, language = template(reason, audience, language)
    return fill(text, details, language)


def placeholders(reason: Reasons | str) -> frozenset[str]:
    """The details the English developer text of ``reason`` fills in."""
    text, _ = template(reason, "developer", "en")
    return frozenset(_PLACEHOLDER.findall(text))


def developer_message(reason: Reasons | str, details: dict[str, Any]) -> str:
    """The English developer text: what failed, which handler, what to declare."""
    return render(reason, details, "developer", "en")


def pick_language(accept_language: str | None) -> str:
    """The first supported language of an ``Accept-Language`` header, else English."""
    if not accept_language:
        return "en"
    for part in accept_language.split(","):
        tag = part.split(";")[0].strip().lower()
        primary = tag.split("-")[0]
        if primary in LANGUAGES:
            return primary
    return "en"
