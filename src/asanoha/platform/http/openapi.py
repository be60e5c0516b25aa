"""The OpenAPI document: every handler's own payload model as its request body."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaValue, models_json_schema

REF_TEMPLATE = "#/components/schemas/{model}"
BEARER_SCHEME = "bearerAuth"
#: The identity provider's scheme, declared when ``ASANOHA_OIDC_ISSUER`` is set.
OIDC_SCHEME = "openIdConnect"

#: Text without U+0000 and unpaired UTF-16 halves: what the service refuses in every string
#: and key of a payload (no database column and no UTF-8 answer can hold them).
STORABLE_TEXT = "^[^\\u0000\\uD800-\\uDFFF]*$"
#: Any JSON value whose strings and keys are storable text.
STORABLE_JSON = "StorableJson"
_STORABLE_JSON_REF = {"$ref": REF_TEMPLATE.format(model=STORABLE_JSON)}
STORABLE_JSON_SCHEMA: dict[str, Any] = {
    "description": "Any JSON value; no text in it (value or key) may hold U+0000 or an "
    "unpaired surrogate.",
    "anyOf": [
        {"type": "null"},
        {"type": "boolean"},
        {"type": "number"},
        {"type": "string", "pattern": STORABLE_TEXT},
        {"type": "array", "items": _STORABLE_JSON_REF},
        {
            "type": "object",
            "propertyNames": {"pattern": STORABLE_TEXT},
            "additionalProperties": _STORABLE_JSON_REF,
        },
    ],
}
#: Keywords of a string schema that already confine its text.
_CONFINED_TEXT = frozenset({"format", "pattern", "enum", "const"})


def storable(schema: Any) -> Any:
    """``schema`` stating what the service refuses: free text gets the ``STORABLE_TEXT``
    pattern, free-form values and objects the ``StorableJson`` schema."""
    if isinstance(schema, list):
        return [storable(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if not schema or set(schema) <= {"title", "description", "default"}:
        # Any value at all (``Any``, ``JsonValue``).
        return {**schema, **_STORABLE_JSON_REF} if schema else dict(_STORABLE_JSON_REF)
    result = {key: _storable_member(key, value) for key, value in schema.items()}
    if result.get("type") == "string" and not _CONFINED_TEXT & set(result):
        result["pattern"] = STORABLE_TEXT
    if result.get("type") == "object":
        result.setdefault("propertyNames", {"pattern": STORABLE_TEXT})
        # Unstated means any (a model that ignores unknown members): those are checked too.
        if result.get("additionalProperties", True) is True:
            result["additionalProperties"] = dict(_STORABLE_JSON_REF)
    return result


def _storable_member(key: str, value: Any) -> Any:
    # Maps of names to schemas: every value is a schema, the names are not.
    if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
        return {name: storable(member) for name, member in value.items()}
    if key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "not", "prefixItems"):
        return storable(value)
    return value


class SchemaCatalogue:
    """JSON schemas of a set of pydantic models, named once for the whole document.

    The handlers' payload models are described by pydantic directly (the routes read the
    raw body so the service layer stays the only validator), and their definitions are
    merged into ``components.schemas``.
    """

    def __init__(self, models: Iterable[type[BaseModel]]) -> None:
        unique = list(dict.fromkeys(models))
        refs, top = models_json_schema(
            [(model, "validation") for model in unique], ref_template=REF_TEMPLATE
        )
        self._refs: dict[type[Any], JsonSchemaValue] = {
            model: ref for (model, _mode), ref in refs.items()
        }
        self.definitions: dict[str, Any] = {
            name: storable(schema) for name, schema in top.get("$defs", {}).items()
        }
        self.definitions[STORABLE_JSON] = STORABLE_JSON_SCHEMA

    def ref(self, model: type[BaseModel]) -> JsonSchemaValue:
        """``{"$ref": ...}`` pointing at ``model`` in the document."""
        return self._refs[model]


def json_body(schema: JsonSchemaValue) -> dict[str, Any]:
    """An OpenAPI request or response ``content`` for a JSON schema."""
    return {"application/json": {"schema": schema}}


def install_openapi(
    api: FastAPI, catalogue: SchemaCatalogue, *, oidc_issuer: str | None = None
) -> None:
    """Replace ``api.openapi`` with one that adds the catalogue and the bearer scheme (and,
    with ``oidc_issuer``, the provider's OpenID Connect discovery, which /docs offers under
    Authorize beside pasting a token)."""

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            document = get_openapi(
                title=api.title,
                version=api.version,
                description=api.description,
                routes=api.routes,
            )
            components = document.setdefault("components", {})
            components.setdefault("schemas", {}).update(catalogue.definitions)
            components.setdefault("securitySchemes", {})[BEARER_SCHEME] = {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "JWT",
            }
            if oidc_issuer:
                components["securitySchemes"][OIDC_SCHEME] = {
                    "type": "openIdConnect",
                    "openIdConnectUrl": oidc_issuer.rstrip("/")
                    + "/.well-known/openid-configuration",
                }
                _offer_provider_sign_in(document)
            api.openapi_schema = document
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]


def _offer_provider_sign_in(document: dict[str, Any]) -> None:
    """Let each bearer operation take the provider's token too: /docs sends a token only for
    the schemes an operation names, so one signed in through the provider would be dropped."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            security = operation.get("security") if isinstance(operation, dict) else None
            if isinstance(security, list) and {BEARER_SCHEME: []} in security:
                operation["security"] = [*security, {OIDC_SCHEME: []}]
