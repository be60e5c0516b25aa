"""Translated texts for every reason, loaded once from ``i18n/<language>.yaml``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import yaml

from asanoha.platform.errors.reasons import Reasons

LANGUAGES = ("en", "de")
_I18N = Path(__file__).with_name("i18n")

Audience = Literal["end_user", "developer"]


@functools.cache
def load_catalogue(language: str) -> dict[str, dict[str, str]]:
    """The ``reason -> {end_user, developer}`` table of one language."""
    with (_I18N / f"{language}.yaml").open(encoding="utf-8") as handle:
        data: dict[str, dict[str, str]] = yaml.safe_load(handle)
    return data


class _Lenient(dict[str, Any]):
    # A template may name a detail the raising code did not supply; keep the placeholder.
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(
    reason: Reasons | str, details: dict[str, Any], audience: Audience, language: str
) -> str:
    """The text for ``reason`` in ``language`` (English when unknown), filled from ``details``."""
    catalogue = load_catalogue(language if language in LANGUAGES else "en")
    entry = catalogue.get(str(reason)) or load_catalogue("en").get(str(reason))
    if entry is None:
        return str(reason)
    return entry[audience].format_map(_Lenient(details))


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
