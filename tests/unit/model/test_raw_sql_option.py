"""``raw_sql="<reason>"``: declared on write, query and consumer handlers, with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from asanoha import Access, Feature
from asanoha.platform.errors import DefinitionError

ADMIN = Access(roles=["Admin"])


class Empty(BaseModel):
    pass


def handle(payload: Empty, ctx: Any) -> None:
    return None


@pytest.mark.parametrize("reason", ["", "   ", 3])
@pytest.mark.parametrize(
    ("kind", "qn"),
    [
        ("write", "shop:write:tally"),
        ("query", "shop:query:tally"),
        ("consumer", "shop:consumer:tally"),
    ],
)
def test_raw_sql_without_a_reason_is_a_definition_error_naming_the_handler(
    kind: str, qn: str, reason: Any
) -> None:
    feature = Feature("shop")
    with pytest.raises(DefinitionError, match=rf"{qn}: raw_sql= needs a non-blank reason"):
        if kind == "write":
            feature.write_handler("tally", access=ADMIN, raw_sql=reason)
        elif kind == "query":
            feature.query_handler("tally", access=ADMIN, raw_sql=reason)
        else:
            feature.consumer("tally", on=["shop:event:sold"], raw_sql=reason)


def test_the_reason_is_kept_on_the_definition_and_absent_means_no_sql() -> None:
    feature = Feature("shop")
    feature.write_handler("tally", access=ADMIN, raw_sql="keeps a tally table")(handle)
    feature.query_handler("read", access=ADMIN, raw_sql="reads the tally table")(handle)
    feature.write_handler("plain", access=ADMIN)(handle)
    feature.consumer("count", on=["shop:event:sold"], raw_sql="counts sales")(handle)
    reasons = {handler.qn: handler.raw_sql for handler in feature.handlers}
    assert reasons == {
        "shop:write:tally": "keeps a tally table",
        "shop:query:read": "reads the tally table",
        "shop:write:plain": None,
    }
    assert [consumer.raw_sql for consumer in feature.consumers] == ["counts sales"]
