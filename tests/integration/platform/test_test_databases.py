"""Test databases: each one its own, named with ``ASANOHA_TEST_DATABASE_PREFIX`` in front."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from asanoha.testing.databases import TestDatabase, admin_url


def server_has(name: str) -> bool:
    engine = create_engine(admin_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).scalar()
    finally:
        engine.dispose()
    return found is not None


def test_a_test_database_takes_the_prefix_and_goes_with_drop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASANOHA_TEST_DATABASE_PREFIX", "suite_b_")
    made = TestDatabase.create("postgres", f"asanoha_t_{uuid.uuid4().hex[:12]}")
    try:
        assert made.name.startswith("suite_b_asanoha_t_")
        assert server_has(made.name)
    finally:
        made.drop()
    assert not server_has(made.name)


@pytest.mark.parametrize("prefix", ["Suite", "a-b", "x" * 21, "drop;"])
def test_a_prefix_that_cannot_start_a_name_is_refused(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASANOHA_TEST_DATABASE_PREFIX", prefix)
    with pytest.raises(ValueError, match="ASANOHA_TEST_DATABASE_PREFIX"):
        TestDatabase.create("postgres", "asanoha_t_never")
