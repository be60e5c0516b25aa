"""Idempotent requests: the first outcome of a write is kept under its key and answered to
every repeat, which writes nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select, update

from asanoha import ConflictError, SessionUser, ValidationError
from asanoha.platform.service.idempotency import Replay, prune_expired
from asanoha.testing import TestUsers
from tests.integration.core import contract_features
from tests.integration.core.contract_features import contracts

ADMIN = TestUsers.admin
PLACE = "contracts:write:place"
KEY = {"Idempotency-Key": "order-1"}


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: Callable[..., Any]) -> Any:
    return asanoha_stack(features=[contracts], database=request.param)


def key_rows(stack: Any) -> list[Any]:
    table = stack.tables.idempotency
    with stack.db.connect() as conn:
        return list(conn.execute(select(table)))


def counts(stack: Any) -> dict[str, int]:
    counted: dict[str, int] = stack.row_counts()
    return counted


def test_a_repeat_answers_the_first_outcome_with_the_replay_header_and_writes_nothing(
    stack: Any,
) -> None:
    first = stack.http.write(PLACE, {"title": "a"}, headers=KEY)
    assert first.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    with stack.nothing_written():
        again = stack.http.write(PLACE, {"title": "a"}, headers=KEY)
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert counts(stack)["contracts:order"] == 1
    assert counts(stack)["outbox"] == 1
    (row,) = key_rows(stack)
    assert (row.tenant_id, row.principal, row.handler_qn, row.key, row.status) == (
        ADMIN.tenant_id,
        ADMIN.id,
        PLACE,
        "order-1",
        200,
    )


def test_the_same_key_with_another_payload_is_refused_and_writes_nothing(stack: Any) -> None:
    stack.http.write(PLACE, {"title": "a"}, headers=KEY)
    with stack.nothing_written():
        error = stack.http.write_err(PLACE, {"title": "b"}, headers=KEY)
    assert (error.http_status, error.reason) == (422, "idempotency_key_reused")
    assert error.details == {"key": "order-1", "handler": PLACE}


def test_a_key_is_the_callers_own_and_the_handlers_own(stack: Any) -> None:
    stack.http.write(PLACE, {"title": "a"}, headers=KEY)
    colleague = SessionUser.of("admin-a2", ADMIN.tenant_id, ["Admin"])
    other = stack.http.write(PLACE, {"title": "a"}, colleague, headers=KEY)
    crud = stack.http.write("contracts:write:order:create", {"title": "a"}, headers=KEY)
    for response in (other, crud):
        assert response.status_code == 200
        assert "Idempotent-Replayed" not in response.headers
    assert counts(stack)["contracts:order"] == 3


def test_a_refusal_is_kept_and_answered_again_with_its_write_undone(stack: Any) -> None:
    first = stack.http.write("contracts:write:place-then-refuse", {"title": "a"}, headers=KEY)
    assert first.status_code == 409
    assert counts(stack)["contracts:order"] == 0
    with stack.nothing_written():
        again = stack.http.write("contracts:write:place-then-refuse", {"title": "a"}, headers=KEY)
    assert again.status_code == 409
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["error"]["reason"] == first.json()["error"]["reason"]
    assert again.json()["error"]["details"] == first.json()["error"]["details"]
    (row,) = key_rows(stack)
    assert row.status == 409


def test_a_failure_is_not_kept_so_a_repeat_runs_again(stack: Any) -> None:
    first = stack.http.write("contracts:write:crash", {"title": "a"}, headers=KEY)
    assert first.status_code == 500
    assert key_rows(stack) == []
    assert counts(stack)["contracts:order"] == 0


@pytest.mark.parametrize(
    ("key", "why"),
    [("k" * 256, "256 characters"), ("", "0 characters"), ("schlüssel", "printable ASCII")],
)
def test_a_key_that_is_too_long_or_not_printable_ascii_is_refused(
    stack: Any, key: str, why: str
) -> None:
    with stack.nothing_written(), pytest.raises(ValidationError) as raised:
        stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key=key)
    assert raised.value.reason == "idempotency_key_invalid"
    assert why in raised.value.details["error"]


def test_a_key_over_http_of_256_characters_answers_400(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(PLACE, {"title": "a"}, headers={"Idempotency-Key": "k" * 256})
    assert (error.http_status, error.reason) == (400, "idempotency_key_invalid")


def test_a_key_of_255_printable_characters_is_taken(stack: Any) -> None:
    key = "".join(chr(32 + n % 95) for n in range(255))
    replay = Replay()
    stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key=key)
    stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key=key, replay=replay)
    assert replay.replayed
    assert counts(stack)["contracts:order"] == 1


def test_a_batch_repeat_answers_the_first_results_and_another_batch_under_the_key_is_refused(
    stack: Any,
) -> None:
    items = {
        "items": [
            {"qn": PLACE, "payload": {"title": "a"}},
            {"qn": PLACE, "payload": {"title": "b"}},
        ]
    }
    first = stack.http.post("/api/batch", items, headers=KEY)
    assert first.status_code == 200
    with stack.nothing_written():
        again = stack.http.post("/api/batch", items, headers=KEY)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    items["items"].pop()
    with stack.nothing_written():
        other = stack.http.post("/api/batch", items, headers=KEY)
    assert (other.status_code, other.json()["error"]["reason"]) == (422, "idempotency_key_reused")
    assert counts(stack)["contracts:order"] == 2


def test_a_nested_write_with_a_key_answers_the_first_outcome_in_the_same_transaction(
    stack: Any,
) -> None:
    result = stack.service.dispatch_write("contracts:write:place-twice", {"title": "a"}, ADMIN)
    assert result["first"] == result["second"]
    assert counts(stack)["contracts:order"] == 1
    assert counts(stack)["outbox"] == 1


def test_an_expired_key_is_pruned_and_a_repeat_after_it_runs_again(stack: Any) -> None:
    stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key="old")
    stack.service.dispatch_write(PLACE, {"title": "b"}, ADMIN, idempotency_key="fresh")
    table = stack.tables.idempotency
    with stack.db.begin() as conn:
        conn.execute(
            update(table).where(table.c.key == "old").values(expires_at=table.c.created_at)
        )
    replay = Replay()
    stack.service.dispatch_write(PLACE, {"title": "a"}, ADMIN, idempotency_key="old", replay=replay)
    assert not replay.replayed
    assert counts(stack)["contracts:order"] == 3
    with stack.db.begin() as conn:
        conn.execute(
            update(table).where(table.c.key == "old").values(expires_at=table.c.created_at)
        )
        assert prune_expired(conn, stack.tables) == 1
    assert [row.key for row in key_rows(stack)] == ["fresh"]


def test_sixteen_concurrent_requests_with_one_key_write_once_and_answer_alike(
    asanoha_stack: Callable[..., Any],
) -> None:
    stack = asanoha_stack(features=[contracts], database="postgres")
    barrier = threading.Barrier(16)
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def send() -> None:
        barrier.wait()
        response = stack.http.write(PLACE, {"title": "same"}, headers=KEY)
        with lock:
            answers.append((response.status_code, response.json()))

    threads = [threading.Thread(target=send) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 16
    assert all(answer == answers[0] for answer in answers)
    assert answers[0][0] == 200
    found = counts(stack)
    assert (found["contracts:order"], found["events"], found["outbox"]) == (1, 1, 1)
    with stack.db.connect() as conn:
        keys = conn.execute(select(func.count()).select_from(stack.tables.idempotency))
        assert keys.scalar_one() == 1


def test_a_repeat_waits_for_the_running_first_at_most_the_configured_time(
    asanoha_stack: Callable[..., Any],
) -> None:
    stack = asanoha_stack(
        features=[contracts], database="postgres", settings={"idempotency_wait": 0.3}
    )
    contract_features.ENTERED.clear()
    contract_features.RELEASE.clear()
    held = "contracts:write:place-held"
    first: list[Any] = []
    runner = threading.Thread(
        target=lambda: first.append(
            stack.service.dispatch_write(held, {"title": "a"}, ADMIN, idempotency_key="slow")
        )
    )
    runner.start()
    try:
        assert contract_features.ENTERED.wait(10)
        with pytest.raises(ConflictError) as raised:
            stack.service.dispatch_write(held, {"title": "a"}, ADMIN, idempotency_key="slow")
        assert raised.value.reason == "idempotency_in_progress"
        assert raised.value.http_status == 409
    finally:
        contract_features.RELEASE.set()
        runner.join()
    replay = Replay()
    again = stack.service.dispatch_write(
        held, {"title": "a"}, ADMIN, idempotency_key="slow", replay=replay
    )
    assert replay.replayed
    assert str(again["id"]) == str(first[0]["id"])
    assert counts(stack)["contracts:order"] == 1
