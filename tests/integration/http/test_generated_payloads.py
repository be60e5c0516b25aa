"""Generated payloads against every write handler: whatever arrives, the answer is never 5xx.

Payloads are drawn from each handler's own JSON schema (so most of them pass validation
and reach the database, including edge values such as huge integers or NUL characters),
mixed with arbitrary JSON.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asanoha import Registry
from asanoha.testing import Stack, TestUsers
from tests.integration.http.features import catalog, gate

# These two fail on purpose (they prove that internal errors are answered as 500).
FAILING_ON_PURPOSE = {"catalog:write:explode", "catalog:write:rename-all"}
WRITE_HANDLERS = [
    handler.qn
    for handler in Registry([gate, catalog]).handlers
    if handler.kind == "write" and handler.qn not in FAILING_ON_PURPOSE
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)

_FORMATS: dict[str, st.SearchStrategy[Any]] = {
    "uuid": st.uuids().map(str),
    "date": st.dates().map(lambda day: day.isoformat()),
    "date-time": st.datetimes(timezones=st.none() | st.timezones()).map(
        lambda moment: moment.isoformat()
    ),
}


def from_schema(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that a JSON schema (as pydantic writes them) admits, edges included."""
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return st.one_of([from_schema(option, defs) for option in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {name: from_schema(properties[name], defs) for name in properties if name in required},
            optional={
                name: from_schema(sub, defs)
                for name, sub in properties.items()
                if name not in required
            },
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs), max_size=3)
    if kind == "string":
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(max_size=min(schema.get("maxLength", 300), 300))
    if kind == "integer":
        return st.integers()
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values


def payloads_for(stack: Stack, qn: str) -> st.SearchStrategy[Any]:
    """Mostly schema-shaped payloads, sometimes anything at all."""
    schema = stack.registry.handler(qn).payload_model.model_json_schema()
    shaped = from_schema(schema, schema.get("$defs", {}))
    return st.one_of(shaped, shaped, shaped, json_values)


@pytest.mark.parametrize("qn", WRITE_HANDLERS)
def test_generated_payloads_never_cause_a_server_error(stack: Stack, qn: str) -> None:
    existing = stack.http.write_ok("catalog:write:item:create", {"name": "seed"}, TestUsers.admin)

    @settings(
        max_examples=50,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(payload=payloads_for(stack, qn), use_existing_id=st.booleans())
    def check(payload: Any, use_existing_id: bool) -> None:
        if use_existing_id and isinstance(payload, dict) and "id" in payload:
            payload = {**payload, "id": existing["id"], "version": 1}
        response = stack.http.write(qn, payload, TestUsers.admin)
        assert response.status_code < 500, (payload, response.json())
        assert response.json()["isSuccess"] is (response.status_code == 200)

    check()
