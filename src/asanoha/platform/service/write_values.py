"""The values an entity write carries: the caller's data validated against the entity's
model, then reshaped by its pre-save hooks and checked by its validate hooks.

Whose fault a bad value is lives here. Caller data the model refuses is the caller's: 400
``validation_error`` naming the handler. A pre-save hook's result is checked like caller
input, but a value it breaks is the application's fault: 500 ``pre_save_hook_failed``
naming the hook. A validate hook's refusal names the handler that wrote and the entity. The
entity executor (``executor``) runs these steps in its order; nothing else runs the hooks.
"""

from __future__ import annotations

from typing import Any

import pydantic

from asanoha.platform.errors import InternalError, Reasons, ValidationError
from asanoha.platform.model import EntityDef, Registry
from asanoha.platform.service.validation import field_errors
from asanoha.platform.store.projections import Row


def validated_values(
    model: type[pydantic.BaseModel], data: dict[str, Any], handler_qn: str
) -> dict[str, Any]:
    """``data`` as ``model`` validates it, only the fields it sets."""
    try:
        return model.model_validate(data).model_dump(exclude_unset=True)
    except pydantic.ValidationError as error:
        raise ValidationError(handler=handler_qn, fields=field_errors(error)) from None


def run_pre_save(
    registry: Registry,
    entity_def: EntityDef,
    values: dict[str, Any],
    previous: Row | None,
    *,
    is_new: bool,
    model: type[pydantic.BaseModel],
) -> dict[str, Any]:
    """``values`` as the entity's pre-save hooks leave them, each result checked by ``model``."""
    for hook in registry.pre_save_hooks(entity_def.key):
        changed = hook(dict(values), previous, is_new)
        # A hook may add or change fields: its result is checked like caller input, but a
        # value it breaks is the application's fault, not the caller's (500, not 400).
        try:
            values = model.model_validate(changed).model_dump(exclude_unset=True)
        except pydantic.ValidationError as error:
            raise InternalError(
                Reasons.PRE_SAVE_HOOK_FAILED,
                entity=entity_def.key,
                hook=_qualified_name(hook),
                fields=field_errors(error),
            ) from None
    return values


def run_validate(
    registry: Registry,
    entity_def: EntityDef,
    handler_qn: str,
    values: dict[str, Any],
    previous: Row | None,
    *,
    is_new: bool,
) -> None:
    """The entity's validate hooks; a refusal names the handler that wrote."""
    for hook in registry.hooks("validate", entity_def.key):
        try:
            hook(dict(values), previous, is_new)
        except ValidationError as error:
            error.details.setdefault("handler", handler_qn)
            error.details.setdefault("entity", entity_def.key)
            raise


def _qualified_name(func: Any) -> str:
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"
