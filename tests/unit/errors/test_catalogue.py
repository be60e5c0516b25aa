"""The reason catalogue and its translations stay in step."""

from __future__ import annotations

import pytest

from asanoha.platform.errors import AccessDeniedError, Reasons, render
from asanoha.platform.errors.messages import LANGUAGES, load_catalogue, pick_language


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_reason_has_end_user_and_developer_text(language: str) -> None:
    catalogue = load_catalogue(language)
    missing = [r.value for r in Reasons if r.value not in catalogue]
    assert not missing, f"{language}.yaml lacks {missing}"
    for reason in Reasons:
        entry = catalogue[reason.value]
        assert entry.get("end_user", "").strip(), f"{language}: {reason} has no end_user text"
        assert entry.get("developer", "").strip(), f"{language}: {reason} has no developer text"


@pytest.mark.parametrize("language", LANGUAGES)
def test_catalogues_list_no_unknown_reason(language: str) -> None:
    assert set(load_catalogue(language)) == {r.value for r in Reasons}


def test_gate_error_carries_reason_in_details_and_names_the_handler() -> None:
    error = AccessDeniedError(
        Reasons.IRREVERSIBLE_OPERATION_REQUIRES_HIGH_RISK,
        handler="f:write:purge",
        resolved_risk="mid",
        operation="forget",
        entity="f:prompt",
    )
    assert error.http_status == 403
    assert error.code == "access_denied"
    assert error.details["reason"] == "irreversible_operation_requires_high_risk"
    assert "f:write:purge" in error.message


def test_user_message_follows_the_language() -> None:
    assert render(
        Reasons.ENTITY_NOT_FOUND, {}, "end_user", pick_language("de-DE,de;q=0.9")
    ).startswith("Der Eintrag")
    assert pick_language("fr-FR") == "en"
    assert pick_language(None) == "en"
