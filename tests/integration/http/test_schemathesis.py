"""The API keeps what its OpenAPI document says, checked by schemathesis's conformance checks
over generated requests: no 5xx, schema-valid requests accepted, schema-violating ones
refused, only documented status codes, answers in the documented shapes.

schemathesis reads the stack's own ``/openapi.json`` and, for every operation, sends its
coverage cases (each field's boundaries, wrong types, missing body, ...) and a bounded
number of generated valid and invalid requests, with an admin token unless the case brings
its own Authorization header, to the in-process ASGI application.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.openapi.checks import RejectedPositiveData

from asanoha.platform.http.openapi import STORABLE_TEXT
from asanoha.testing import Stack, TestUsers

EXAMPLES_PER_OPERATION = 25
#: Fixture handlers that fail on purpose (they test the 500 answer itself).
DELIBERATE_FAILURES = frozenset({"catalog:write:explode", "catalog:write:rename-all"})
#: Operations that answer an endless stream (the live feed): their own suite reads them.
ENDLESS = frozenset(
    {
        "stream_events",
        "stream_events_filtered",
        "stream_handler_events",
        "stream_handler_events_filtered",
    }
)
#: Operations that end the one credential every case is sent with (revoking it would turn
#: the rest of the run into 401s); test_access_tokens.py covers them.
ENDS_THE_CREDENTIAL = frozenset({"auth-revoke"})


#: Refusals of schema-valid payloads for rules a JSON schema cannot state: a list's sort and
#: filter name fields the entity declares sortable or filterable, a cursor is one the API
#: issued, an update changes something, a decimal sent as a JSON number has at most 10
#: digits after the point and 38 in all (``multipleOf`` cannot say it of binary floats such
#: as 5.8e-235; the text form's pattern does) (and, answered 422, a reference names an existing row, a file field an
#: uploaded file). Any other refusal of a schema-valid request is a disagreement between the document
#: and the validation.
RULES_BEYOND_THE_SCHEMA = frozenset(
    {"not_sortable", "not_filterable", "invalid_cursor", "unknown_operator", "invalid_value",
     "list_type", "string_type", "no_changes", "not_searchable",
     "offset_with_cursor", "decimal_max_places", "decimal_max_digits"}
)  # fmt: skip


def refused_by_a_rule(case: Any, response: Any) -> bool:
    """Whether ``response`` refuses only for rules beyond the schema (by their field types),
    or for text the document's pattern excludes (the generator does not always keep to
    ``STORABLE_TEXT``: such a case is not schema-valid)."""
    if response.status_code == 422:
        # A reference names a row the tenant has, a file field an upload of the tenant:
        # checked in the write's transaction.
        reason = response.json().get("error", {}).get("reason")
        return reason in ("reference_not_found", "file_not_found")
    if response.status_code != 400:
        return False
    error = response.json().get("error", {})
    types = {found.get("type") for found in error.get("details", {}).get("fields") or []}
    if "unstorable_text" in types and holds_unstorable_text(case.body):
        types.discard("unstorable_text")
        return types <= RULES_BEYOND_THE_SCHEMA
    return bool(types) and types <= RULES_BEYOND_THE_SCHEMA


def holds_unstorable_text(value: Any) -> bool:
    """Whether a string or key anywhere in ``value`` breaks the ``STORABLE_TEXT`` pattern."""
    if isinstance(value, str):
        return re.fullmatch(STORABLE_TEXT, value) is None
    if isinstance(value, list):
        return any(holds_unstorable_text(item) for item in value)
    if isinstance(value, dict):
        return any(holds_unstorable_text(k) or holds_unstorable_text(v) for k, v in value.items())
    return False


def failures_of(exc: BaseException) -> list[BaseException]:
    """The single failures schemathesis raised (one or a group)."""
    group = getattr(exc, "exceptions", None)
    return list(group) if group else [exc]


def describe(case: Any, failure: BaseException, response: Any) -> str:
    """``operation: check title [scenario] body -> status answer``, in one line."""
    scenario = case.meta.phase.data.description if case.meta and case.meta.phase else ""
    title = getattr(failure, "title", type(failure).__name__)
    return (
        f"{case.operation.label}: {title} [{scenario}] {case.body!r:.200} -> "
        f"{response.status_code} {response.text[-400:]}"
    )


class Conformance:
    """Sends cases and keeps every failed check, with the statuses seen."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.failures: list[str] = []
        self.statuses: set[int] = set()
        self.cases = 0

    def check(self, case: Any) -> None:
        self.cases += 1
        response = case.call(headers=self.headers)
        self.statuses.add(response.status_code)
        try:
            case.validate_response(response, headers=self.headers)
        except (Exception, BaseExceptionGroup) as exc:
            self.failures.extend(
                describe(case, failure, response)
                for failure in failures_of(exc)
                if not (
                    isinstance(failure, RejectedPositiveData) and refused_by_a_rule(case, response)
                )
            )

    def coverage(self, schema: Any, operation: Any) -> None:
        """The coverage phase's cases of ``operation``, valid and invalid."""
        config = schema.config.generation_for(operation=operation, phase="coverage")
        for case in schema.iter_coverage_cases(
            operation, generation_modes=list(GenerationMode), generation_config=config
        ):
            self.check(case)

    def fuzz(self, operation: Any) -> None:
        """Generated valid and invalid requests of ``operation``."""
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
            self.check(case)

        run()


@pytest.fixture
def api_schema(stack: Stack) -> Any:
    """The stack's OpenAPI document, its cases sent to an app of the stack in-process."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", stack.app.build_http())
    # A batch above its documented maxItems is refused with 413 batch_too_large.
    rejection = schema.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]
    return schema


def operations_of(schema: Any) -> list[Any]:
    return [
        operation
        for operation in (result.ok() for result in schema.get_all_operations())
        if operation.definition.raw.get("operationId")
        not in DELIBERATE_FAILURES | ENDS_THE_CREDENTIAL | ENDLESS
    ]


def test_every_operation_keeps_its_documented_contract(stack: Stack, api_schema: Any) -> None:
    operations = operations_of(api_schema)
    assert len(operations) >= len(stack.registry.handlers)
    conformance = Conformance(stack.http.headers_for(TestUsers.admin))
    for operation in operations:
        conformance.coverage(api_schema, operation)
        conformance.fuzz(operation)
    assert conformance.failures == [], "\n".join(conformance.failures)
    # The requests reached the handlers: some succeeded, some were refused.
    assert {200, 400, 401} <= conformance.statuses
    assert conformance.cases > 20 * len(operations)
