"""A list sorted on a sortable field reads the field's index in its order, in both
directions: a first page stops after a page instead of sorting every matching row."""

from __future__ import annotations

import random

import pytest

from asanoha.testing.plugin import StackFactory
from asanoha.testing.statements import capture_statements
from tests.integration.lists.features import notes
from tests.integration.lists.test_keyset_paging import ADMIN, LIST, create_rows


@pytest.mark.parametrize("sort", ["-rank", "rank"])
def test_a_sorted_list_is_read_in_the_order_of_the_fields_index(
    asanoha_stack: StackFactory, sort: str
) -> None:
    stack = asanoha_stack(features=[notes], database="postgres")
    create_rows(stack, 200, random.Random(3))
    with capture_statements(stack.app.database.engine) as statements:
        stack.service.dispatch_query(LIST, {"sort": [sort], "limit": 10}, ADMIN)
    (statement, parameters), *_ = [s for s in statements if "FROM list_notes" in s[0]]
    with stack.app.database.engine.connect() as conn:
        # Too few rows for the planner to prefer the index by itself: full scans and full
        # sorts are priced out, so what remains is whether the index gives the list's order.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.exec_driver_sql(f"SET LOCAL {setting} = off")
        plan = "\n".join(
            line for (line,) in conn.exec_driver_sql(f"EXPLAIN (COSTS OFF) {statement}", parameters)
        )
    assert "ix_list_notes_rank" in plan, plan
    assert "Presorted Key: rank" in plan, plan
