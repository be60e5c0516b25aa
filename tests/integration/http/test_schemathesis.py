"""Generated requests over every operation of ``/openapi.json`` never answer 5xx.

schemathesis reads the stack's own OpenAPI document and generates valid and invalid requests
for each operation; they are sent with an admin token (unless the case brings its own
Authorization header) through the stack's client to the in-process ASGI application. The
number of examples is bounded so the test stays short.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

from asanoha.testing import Stack, TestUsers

EXAMPLES_PER_OPERATION = 15
#: Fixture handlers that fail on purpose (they test the 500 answer itself).
DELIBERATE_FAILURES = frozenset({"catalog:write:explode", "catalog:write:rename-all"})
BASE_URL = "http://testserver"


def send(stack: Stack, case: Any, headers: dict[str, str]) -> Any:
    """Send ``case`` through the stack's client (its app's lifespan is already running)."""
    request = case.as_transport_kwargs(base_url=BASE_URL)
    body: dict[str, Any] = {}
    if "json" in request:
        body["json"] = request["json"]
    elif request.get("data") is not None:
        data = request["data"]
        body["content"] = data.encode() if isinstance(data, str) else data
    return stack.http.client.request(
        request["method"],
        request["url"],
        headers={**headers, **request.get("headers", {})},
        params=request.get("params") or None,
        **body,
    )


def server_errors_of(
    stack: Stack, operation: Any, headers: dict[str, str], statuses: set[int]
) -> list[str]:
    """The requests of ``operation`` that answered 5xx, as ``status method path body``; every
    status seen goes into ``statuses``."""
    found: list[str] = []
    strategy = operation.as_strategy(
        generation_mode=GenerationMode.POSITIVE
    ) | operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = send(stack, case, headers)
        statuses.add(response.status_code)
        if response.status_code >= 500:
            found.append(f"{response.status_code} {case.method} {case.path} {case.body!r:.300}")

    run()
    return found


def test_generated_requests_never_answer_5xx(stack: Stack) -> None:
    schema = schemathesis.openapi.from_dict(stack.http.client.get("/openapi.json").json())
    headers = stack.http.headers_for(TestUsers.admin)
    operations = [
        operation
        for operation in (result.ok() for result in schema.get_all_operations())
        if operation.definition.raw.get("operationId") not in DELIBERATE_FAILURES
    ]
    assert len(operations) >= len(stack.registry.handlers)
    statuses: set[int] = set()
    failures = [
        failure
        for operation in operations
        for failure in server_errors_of(stack, operation, headers, statuses)
    ]
    assert failures == []
    # The requests reached the handlers: some succeeded, some were refused.
    assert {200, 400, 401} <= statuses
