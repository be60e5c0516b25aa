"""Random payload pairs under one key: equal payloads (after validation) replay the first
outcome and write nothing; different ones answer 422 ``idempotency_key_reused``."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asanoha import UnprocessableError
from asanoha.platform.service.idempotency import Replay
from asanoha.testing import TestUsers
from tests.integration.core.contract_features import contracts

PLACE = "contracts:write:place"
#: Few titles, so that equal pairs come up as often as different ones; extra keys are
#: dropped by validation, so they make no difference.
payloads = st.fixed_dictionaries(
    {"title": st.sampled_from(["tea", "tée", "tea "])},
    optional={"note": st.sampled_from(["x", "y"])},
)
keys = itertools.count()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(first=payloads, second=payloads)
def test_a_repeat_replays_only_an_equal_payload(asanoha_stack: Any, first, second) -> None:
    stack = pair_stack(asanoha_stack)
    key = f"pair-{next(keys)}"
    answer = stack.service.dispatch_write(PLACE, first, TestUsers.admin, idempotency_key=key)
    before = stack.row_counts()
    replay = Replay()
    if first["title"] == second["title"]:
        again = stack.service.dispatch_write(
            PLACE, second, TestUsers.admin, idempotency_key=key, replay=replay
        )
        assert replay.replayed
        assert str(again["id"]) == str(answer["id"])
    else:
        try:
            stack.service.dispatch_write(PLACE, second, TestUsers.admin, idempotency_key=key)
        except UnprocessableError as refused:
            assert refused.reason == "idempotency_key_reused"
        else:
            raise AssertionError("a different payload under the same key was not refused")
    assert stack.row_counts() == before


_stacks: dict[int, Any] = {}


def pair_stack(asanoha_stack: Any) -> Any:
    """One stack for every example of a test run (a stack per example costs a database)."""
    made = _stacks.get(id(asanoha_stack))
    if made is None:
        made = _stacks[id(asanoha_stack)] = asanoha_stack(features=[contracts])
    return made
