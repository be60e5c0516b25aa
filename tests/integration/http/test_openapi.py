"""The OpenAPI document describes every handler with its own request model."""

from __future__ import annotations

from typing import Any

from asanoha.testing import Stack


def refs_in(node: Any) -> list[str]:
    """Every ``$ref`` in a JSON document."""
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in refs_in(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs_in(value)]
    return []


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def test_document_is_well_formed_openapi(stack: Stack) -> None:
    response = stack.http.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    assert {"title", "version"} <= set(document["info"])
    for path, item in document["paths"].items():
        assert path.startswith("/")
        for method, operation in item.items():
            assert method in {"get", "post", "put", "patch", "delete"}
            assert operation["responses"], f"{method} {path} has no responses"
            assert all(code == "default" or code.isdigit() for code in operation["responses"])
    operation_ids = [
        op["operationId"] for item in document["paths"].values() for op in item.values()
    ]
    assert len(operation_ids) == len(set(operation_ids))
    for ref in refs_in(document):
        assert resolve(document, ref) is not None


def test_document_lists_every_handler_with_its_request_schema(stack: Stack) -> None:
    document = stack.http.client.get("/openapi.json").json()
    for handler in stack.registry.handlers:
        path = f"/api/{handler.kind}/{handler.qn}"
        assert path in document["paths"], f"{handler.qn} is missing"
        operation = document["paths"][path]["post"]
        schema_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = resolve(document, schema_ref)
        expected = handler.payload_model.model_json_schema()
        assert set(schema.get("properties", {})) == set(expected.get("properties", {}))
        assert set(schema.get("required", [])) == set(expected.get("required", []))
        assert operation["security"]


def test_update_schema_describes_its_nested_changes(stack: Stack) -> None:
    document = stack.http.client.get("/openapi.json").json()
    operation = document["paths"]["/api/write/catalog:write:item:update"]["post"]
    schema = resolve(
        document, operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    )
    assert set(schema["required"]) == {"id", "version", "changes"}
    changes = resolve(document, schema["properties"]["changes"]["$ref"])
    assert "quantity" in changes["properties"]


def test_instruction_fields_are_marked_in_the_schema(stack: Stack) -> None:
    document = stack.http.client.get("/openapi.json").json()
    operation = document["paths"]["/api/write/instructiongate:write:prompt:create"]["post"]
    schema = resolve(
        document, operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    )
    assert schema["properties"]["body"].get("x-read-as-instruction") is True


def test_docs_page_is_served(stack: Stack) -> None:
    response = stack.http.client.get("/docs")
    assert response.status_code == 200
    assert "swagger" in response.text.lower()
