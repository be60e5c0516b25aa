"""Turn pydantic validation failures into ``ValidationError`` with one entry per field path."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic

from asanoha.platform.errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)


def field_errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    """``[{"path", "type", "message"}]`` for every problem pydantic found."""
    return [
        {
            "path": ".".join(str(part) for part in error["loc"]) or "$",
            "type": error["type"],
            "message": error["msg"],
        }
        for error in exc.errors(include_url=False, include_input=False)
    ]


def validate_payload(model: type[M], payload: Any, handler: str) -> M:
    """``payload`` (a dict or a model instance) validated as ``model``."""
    if isinstance(payload, model):
        return payload
    if isinstance(payload, pydantic.BaseModel):
        payload = payload.model_dump(exclude_unset=True)
    try:
        return model.model_validate(payload)
    except pydantic.ValidationError as exc:
        raise ValidationError(handler=handler, fields=field_errors(exc)) from None


def invalid_field(handler: str, path: str, type: str, message: str) -> ValidationError:
    """A ``ValidationError`` about one field, for checks pydantic does not make."""
    return ValidationError(
        handler=handler, fields=[{"path": path, "type": type, "message": message}]
    )
