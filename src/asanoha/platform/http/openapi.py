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
        self.definitions: dict[str, Any] = top.get("$defs", {})

    def ref(self, model: type[BaseModel]) -> JsonSchemaValue:
        """``{"$ref": ...}`` pointing at ``model`` in the document."""
        return self._refs[model]


def json_body(schema: JsonSchemaValue) -> dict[str, Any]:
    """An OpenAPI request or response ``content`` for a JSON schema."""
    return {"application/json": {"schema": schema}}


def install_openapi(api: FastAPI, catalogue: SchemaCatalogue) -> None:
    """Replace ``api.openapi`` with one that adds the catalogue and the bearer scheme."""

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
            api.openapi_schema = document
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
