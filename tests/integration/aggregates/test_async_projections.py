"""Async projections (``mode="async"``): kept by a consumer of their own after the write, so
the table holds what the consumer delivered; a rebuild replays exactly that into a shadow and
swaps it in, so the consumer goes on from its cursor without applying an event twice or
missing one, also while writers and the consumer run beside it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, delete, select, update

from asanoha.handlers import personal_data
from asanoha.platform.consumers.projections import rebuild_projection
from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Feature, Registry
from tests.integration.aggregates.conftest import ADMIN
from tests.integration.aggregates.features import (
    account_totals,
    deposited,
    ledger,
    project_account_totals,
    withdrawn,
)

KEEPER = "ledger-views:consumer:projection-account-totals"
LATER = "ledger-views:projection:account-totals"

later_metadata = MetaData()
later_totals = Table(
    "ledger_account_totals_later",
    later_metadata,
    Column("tenant_id", String(64), primary_key=True),
    Column("account", String(64), primary_key=True),
    Column("balance", Integer, nullable=False),
    Column("moves", Integer, nullable=False),
)
views = Feature("ledger-views")


# The inline projection's own function, kept by a consumer.
views.projection(
    "account-totals",
    table=later_totals,
    on=[deposited.qn, withdrawn.qn],
    mode="async",
    partitions=2,
)(project_account_totals)


# The same projection in a feature a tenant may switch off.
switchable_totals = later_totals.to_metadata(MetaData(), name="ledger_account_totals_switchable")
switchable = Feature("ledger-switchable", toggleable=True)
switchable.projection(
    "account-totals", table=switchable_totals, on=[deposited.qn, withdrawn.qn], mode="async"
)(project_account_totals)


def _totals(stack: Any, table: Table) -> dict[str, tuple[int, int]]:
    with stack.db.connect() as conn:
        rows = conn.execute(select(table)).all()
    return {row.account: (row.balance, row.moves) for row in rows}


def _catch_up(stack: Any) -> None:
    while stack.consumers.run_once([KEEPER]):
        pass


def _accounts(stack: Any, count: int) -> list[str]:
    names = [f"acct-{n}-{id(stack) % 10_000}" for n in range(count)]
    for name in names:
        payload = {"account": name, "owner": "Ada", "email": "ada@example.org"}
        stack.http.write_ok("ledger:write:open", payload, ADMIN)
    return names


def _deposit(stack: Any, account: str, amount: int) -> None:
    stack.service.dispatch_write(
        "ledger:write:deposit", {"account": account, "amount": amount}, ADMIN
    )


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Any) -> Any:
    return asanoha_stack(features=[ledger, personal_data.feature, views], database=request.param)


def test_an_async_projection_is_kept_by_its_consumer_after_the_write(stack: Any) -> None:
    accounts = _accounts(stack, 3)
    for number, account in enumerate(accounts * 2):
        _deposit(stack, account, number + 1)
    stack.http.write_ok("ledger:write:withdraw", {"account": accounts[0], "amount": 2}, ADMIN)
    # The writes committed without it: the table waits for its consumer.
    assert _totals(stack, later_totals) == {}
    [status] = [s for s in stack.consumers.status() if s.name == KEEPER]
    assert len(status.partitions) == 2
    _catch_up(stack)
    assert _totals(stack, later_totals) == _totals(stack, account_totals)
    assert len(_totals(stack, later_totals)) == 3


def test_a_rebuild_holds_what_the_consumer_delivered_and_the_consumer_goes_on(
    stack: Any,
) -> None:
    accounts = _accounts(stack, 3)
    for number, account in enumerate(accounts * 2):
        _deposit(stack, account, number + 1)
    _catch_up(stack)
    delivered = _totals(stack, account_totals)
    # More writes the consumer has not delivered yet, and a table that drifted.
    for account in accounts:
        _deposit(stack, account, 100)
    with stack.db.begin() as conn:
        conn.execute(delete(later_totals).where(later_totals.c.account == accounts[0]))
        conn.execute(update(later_totals).values(balance=0))

    declared = stack.registry.find_projection(LATER)
    result = rebuild_projection(stack.db, stack.tables, declared, batch=2)
    assert (result.projection, result.replayed, result.restarted) == (LATER, 6, False)
    assert _totals(stack, later_totals) == delivered
    _catch_up(stack)
    assert _totals(stack, later_totals) == _totals(stack, account_totals)


def test_a_rebuild_whose_consumer_was_repartitioned_meanwhile_replays_under_the_lock(
    stack: Any,
) -> None:
    accounts = _accounts(stack, 3)
    for account in accounts:
        _deposit(stack, account, 5)
    _catch_up(stack)
    delivered = _totals(stack, account_totals)
    for account in accounts:
        _deposit(stack, account, 50)
    repartitioned: list[int] = []

    def repartition_once(progress: Any) -> None:
        # While the shadow is replayed, an operator gives the consumer three partitions.
        if not repartitioned:
            repartitioned.append(stack.consumers.repartition(KEEPER, 3))

    declared = stack.registry.find_projection(LATER)
    result = rebuild_projection(
        stack.db, stack.tables, declared, batch=2, progress=repartition_once
    )
    assert (repartitioned, result.restarted) == ([2], True)
    assert _totals(stack, later_totals) == delivered
    _catch_up(stack)
    assert _totals(stack, later_totals) == _totals(stack, account_totals)


def test_a_rebuild_beside_writers_and_the_consumer_equals_the_inline_projection(
    asanoha_stack: Any,
) -> None:
    # Concurrent writers need a database that takes them (Postgres).
    stack = asanoha_stack(features=[ledger, personal_data.feature, views], database="postgres")
    accounts = _accounts(stack, 4)
    for number in range(40):
        _deposit(stack, accounts[number % 4], number)
    _catch_up(stack)
    stop = threading.Event()
    started = threading.Barrier(4)
    failures: list[BaseException] = []

    def write(mine: list[str]) -> None:
        number = 0
        while not stop.is_set():
            number += 1
            try:
                _deposit(stack, mine[number % 2], 1)
            except BaseException as error:  # pragma: no cover - reported below
                failures.append(error)
                return
            if number == 1:
                started.wait(timeout=60)

    def deliver() -> None:
        first = True
        while not stop.is_set():
            try:
                stack.consumers.run_once([KEEPER])
            except BaseException as error:  # pragma: no cover - reported below
                failures.append(error)
                return
            if first:
                first = False
                started.wait(timeout=60)

    threads = [threading.Thread(target=write, args=(accounts[n::2],)) for n in range(2)]
    threads.append(threading.Thread(target=deliver))
    for thread in threads:
        thread.start()
    try:
        started.wait(timeout=60)
        declared = stack.registry.find_projection(LATER)
        result = rebuild_projection(stack.db, stack.tables, declared, batch=5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not failures
    assert result.replayed >= 40
    _catch_up(stack)
    assert _totals(stack, later_totals) == _totals(stack, account_totals)
    assert sum(moves for _, moves in _totals(stack, later_totals).values()) >= 42


def test_an_async_projection_declared_wrong_fails_at_definition() -> None:
    feature = Feature("views")
    table = Table("views_t", MetaData(), Column("id", Integer, primary_key=True))
    with pytest.raises(DefinitionError, match="partitions= applies to the consumer"):
        feature.projection("t", table=table, on=[deposited.qn], partitions=2)(
            project_account_totals
        )
    with pytest.raises(DefinitionError, match="mode= is 'inline' or 'async'"):
        feature.projection("t", table=table, on=[deposited.qn], mode="later")(  # type: ignore[arg-type]
            project_account_totals
        )
    taken = Feature("views")
    taken.projection("t", table=table, on=[deposited.qn], mode="async")(project_account_totals)

    @taken.consumer("projection-t", on=[deposited.qn])
    def other(event: Any, ctx: Any) -> None: ...

    with pytest.raises(DefinitionError, match="its consumer's name 'views:consumer:projection-t'"):
        Registry([ledger, taken])


def test_the_command_line_lists_each_projection_with_its_lag(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import sys

    from typer.testing import CliRunner

    from asanoha.cli import cli

    monkeypatch.setattr(sys.modules[__name__], "APP", stack.app, raising=False)
    accounts = _accounts(stack, 1)
    _deposit(stack, accounts[0], 5)
    listed = CliRunner().invoke(
        cli, ["projections", "list", "--json", "--app", f"{__name__}:APP"], env={"COLUMNS": "200"}
    )
    assert listed.exit_code == 0, listed.output
    found = {row["projection"]: row for row in json.loads(listed.output)["projections"]}
    assert found["ledger:projection:account-totals"]["lag"] == 0
    later = found[LATER]
    assert (later["mode"], later["consumer"], later["partitions"]) == ("async", KEEPER, 2)
    assert later["lag"] == 1
    _catch_up(stack)
    again = CliRunner().invoke(cli, ["projections", "list", "--app", f"{__name__}:APP"])
    assert LATER in again.output and "async" in again.output


def test_a_switched_off_features_async_projection_stays_current(asanoha_stack: Any) -> None:
    # A read model follows every event: its consumer parks nothing, so the table is
    # current when the feature is switched on again (its queries are refused meanwhile).
    stack = asanoha_stack(features=[ledger, personal_data.feature, views, switchable])
    with stack.db.begin() as conn:
        settings = stack.service.feature_settings
        settings.set_enabled(conn, ADMIN.tenant_id, "ledger-switchable", False, "test")
    [account] = _accounts(stack, 1)
    _deposit(stack, account, 5)
    keeper = "ledger-switchable:consumer:projection-account-totals"
    while stack.consumers.run_once([keeper]):
        pass
    assert _totals(stack, switchable_totals) == _totals(stack, account_totals)
    assert _totals(stack, switchable_totals)[account][0] == 5
    [status] = [found for found in stack.consumers.status() if found.name == keeper]
    assert (status.lag, status.parked) == (0, 0)
