"""Keyset paging: a cursor holds the last row's sort values, so rows inserted or deleted
between two pages move no row across the boundary (an offset would skip or repeat rows)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.lists.features import notes

ADMIN = TestUsers.admin
CREATE = "notes:write:note:create"
DELETE = "notes:write:note:delete"
LIST = "notes:query:note:list"
ROWS = 2000


@pytest.fixture(params=["postgres", "sqlite"])
def stack(request: pytest.FixtureRequest, asanoha_stack: StackFactory) -> Stack:
    return asanoha_stack(features=[notes], database=request.param)


def note(rng: random.Random, title: str) -> dict[str, Any]:
    """A note whose rank and price repeat (ties) and are sometimes missing (nulls)."""
    rank = rng.choice([None, *range(40)])
    price = rng.choice([None, "0.5", "1.25", "10", "9.75", "100"])
    return {"title": title, "rank": rank, "price": price}


def create_rows(stack: Stack, count: int, rng: random.Random) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 100):
        items = [(CREATE, note(rng, f"row {n}")) for n in range(start, min(count, start + 100))]
        ids += [row["id"] for row in stack.service.dispatch_batch(items, ADMIN)]
    return [str(row_id) for row_id in ids]


class Churn(threading.Thread):
    """Inserts rows and deletes rows (the original ones among them) until stopped; each
    change releases one permit, so the reader can wait for changes between its pages."""

    def __init__(self, stack: Stack, originals: list[str]) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.rng = random.Random(7)
        self.alive = list(originals)
        self.inserted: set[str] = set()
        self.deleted: set[str] = set()
        self.changes = threading.Semaphore(0)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                created = self.stack.service.dispatch_write(CREATE, note(self.rng, "new"), ADMIN)
                self.inserted.add(str(created["id"]))
                self.alive.append(str(created["id"]))
                victim = self.alive.pop(self.rng.randrange(len(self.alive)))
                self.stack.service.dispatch_write(DELETE, {"id": victim}, ADMIN)
                self.deleted.add(victim)
                self.changes.release()
        except BaseException as error:  # reported by the test
            self.error = error
            self.changes.release()


def page_through(stack: Stack, sort: list[str], churn: Churn, limit: int) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        payload: dict[str, Any] = {"sort": sort, "limit": limit}
        if cursor:
            payload["cursor"] = cursor
        page = stack.service.dispatch_query(LIST, payload, ADMIN)
        seen += [str(row["id"]) for row in page["rows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
        # Rows change between every two pages, before and after the cursor.
        for _ in range(2):
            assert churn.changes.acquire(timeout=60), "the churn thread stalled"
        assert churn.error is None, churn.error


@pytest.mark.parametrize("sort", [[], ["-rank"], ["price", "-title"]])
def test_paging_while_rows_are_inserted_and_deleted_reads_each_lasting_row_once(
    stack: Stack, sort: list[str]
) -> None:
    originals = create_rows(stack, ROWS, random.Random(3))
    churn = Churn(stack, originals)
    churn.start()
    try:
        seen = page_through(stack, sort, churn, limit=97)
    finally:
        churn.stop.set()
        churn.join(timeout=60)
    assert churn.error is None, churn.error
    assert churn.deleted & set(originals), "the churn deleted none of the original rows"
    counts = Counter(seen)
    assert [row for row, n in counts.items() if n > 1] == []
    lasting = set(originals) - churn.deleted
    assert lasting - counts.keys() == set()
    assert counts.keys() <= set(originals) | churn.inserted


@pytest.mark.parametrize("sort", ["-rank", "rank"])
def test_pages_follow_the_order_of_one_query_a_null_as_the_largest_value(
    stack: Stack, sort: str
) -> None:
    rng = random.Random(5)
    create_rows(stack, 120, rng)
    whole = stack.service.dispatch_query(LIST, {"sort": [sort], "limit": 500}, ADMIN)
    paged: list[dict[str, Any]] = []
    cursor = None
    while True:
        payload: dict[str, Any] = {"sort": [sort], "limit": 7}
        if cursor:
            payload["cursor"] = cursor
        page = stack.service.dispatch_query(LIST, payload, ADMIN)
        paged += page["rows"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [row["id"] for row in paged] == [row["id"] for row in whole["rows"]]
    assert len(paged) == 120
    ranks = [row["rank"] for row in paged]
    known = [rank for rank in ranks if rank is not None]
    nulls = len(ranks) - len(known)
    assert 0 < nulls < len(ranks)
    descending = sort.startswith("-")
    assert known == sorted(known, reverse=descending)
    # Nulls first descending, last ascending: the order of the field's index either way.
    if descending:
        assert ranks[:nulls] == [None] * nulls
    else:
        assert ranks[len(known) :] == [None] * nulls


def test_offset_still_skips_rows_of_the_first_page(stack: Stack) -> None:
    create_rows(stack, 5, random.Random(1))
    whole = stack.service.dispatch_query(LIST, {}, ADMIN)["rows"]
    skipped = stack.service.dispatch_query(LIST, {"offset": 2, "limit": 2}, ADMIN)
    assert [row["id"] for row in skipped["rows"]] == [row["id"] for row in whole[2:4]]
    rest = stack.service.dispatch_query(LIST, {"cursor": skipped["next_cursor"]}, ADMIN)
    assert [row["id"] for row in rest["rows"]] == [row["id"] for row in whole[4:]]
