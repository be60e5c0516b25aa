"""An error's text (``str()``, and ``repr()`` for Celery's worker log) carries its reason and
the details that say what is wrong, so every place that prints it says why."""

from __future__ import annotations

from asanoha.platform.errors import (
    AccessDeniedError,
    AsanohaError,
    Reasons,
    ServiceUnavailableError,
    ValidationError,
)
from asanoha.platform.errors.exceptions import SHOWN_FIELDS
from asanoha.platform.service.validation import invalid_field


def test_a_validation_errors_text_names_each_field_and_its_problem() -> None:
    error = ValidationError(
        handler="desk:write:record-notify",
        fields=[
            {"path": "version", "type": "missing", "message": "Field required"},
            {"path": "note.0", "type": "string_type", "message": "Input should be a string"},
        ],
    )
    assert str(error) == (
        "The payload of desk:write:record-notify failed validation; see details.fields. "
        "[reason: validation_failed; version: Field required (missing); "
        "note.0: Input should be a string (string_type)]"
    )
    assert repr(error) == f"ValidationError({str(error)!r})"


def test_a_long_list_of_field_problems_is_cut_and_counted() -> None:
    fields = [{"path": f"f{n}", "type": "missing", "message": "Field required"} for n in range(15)]
    text = str(ValidationError(handler="h", fields=fields))
    assert f"f{SHOWN_FIELDS - 1}: Field required" in text
    assert f"f{SHOWN_FIELDS}:" not in text
    assert f"and {15 - SHOWN_FIELDS} more in details.fields" in text


def test_details_the_message_already_says_are_not_repeated() -> None:
    error = AccessDeniedError(Reasons.ROLE_REQUIRED, handler="shop:write:refund", roles=["Admin"])
    assert str(error) == (
        "shop:write:refund is not open to this caller; its access rule admits ['Admin']. "
        "[reason: role_required]"
    )


def test_details_outside_the_message_are_named() -> None:
    error = ServiceUnavailableError(Reasons.SERVICE_UNAVAILABLE, retryable=True, code="08006")
    assert str(error).endswith("[reason: service_unavailable; retryable: True; code: 08006]")
    custom = AsanohaError(Reasons.UNPROCESSABLE, "the invoice is closed", invoice="INV-7")
    assert str(custom) == "the invoice is closed [reason: unprocessable; invoice: INV-7]"


def test_a_one_field_error_made_by_hand_says_the_field() -> None:
    error = invalid_field("h", "cursor", "invalid_cursor", "the cursor is not one this list made")
    assert "cursor: the cursor is not one this list made (invalid_cursor)" in str(error)
