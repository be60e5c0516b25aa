"""A database restart costs no failed call: pooled connections are tested before use on
Postgres unless ``ASANOHA_DATABASE_PRE_PING=false``."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from asanoha.testing import Stack, TestUsers
from asanoha.testing.plugin import StackFactory
from tests.integration.http.features import catalog, gate

LIST = "catalog:query:item:list"


def end_server_sessions(stack: Stack) -> int:
    """End every session the server holds for the stack's database, as a restart does;
    the pool keeps its (now dead) connections. Returns how many it ended."""
    with stack.db.engine.connect() as conn:
        ended = conn.execute(
            text(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()) AS ended"
            ),
            {"name": stack.database_name},
        ).scalar_one()
    return int(ended)


def fill_pool(stack: Stack, calls: int) -> None:
    """Check out ``calls`` connections at once and return them to the pool."""
    connections = [stack.db.engine.connect() for _ in range(calls)]
    for conn in connections:
        conn.exec_driver_sql("SELECT 1")
        conn.close()


def test_calls_after_a_database_restart_succeed_by_default(asanoha_stack: StackFactory) -> None:
    stack = asanoha_stack(features=[gate, catalog])
    assert stack.db.engine.pool._pre_ping is True
    fill_pool(stack, 4)
    # The pool's idle connections die with their sessions (the checking one included).
    assert end_server_sessions(stack) >= 3
    for _ in range(5):
        response = stack.http.post(f"/api/query/{LIST}", {}, TestUsers.admin)
        assert response.status_code == 200, response.text
    assert stack.http.client.get("/health/ready").status_code == 200


def test_without_pre_ping_a_restart_fails_calls_on_stale_connections(
    asanoha_stack: StackFactory,
) -> None:
    # What the default prevents, shown with the setting off. Called in-process: over HTTP,
    # the token check's periodic read of revocations may meet the dead connection first
    # (and its failure, which keeps the last copy, renews the pool before the call).
    stack = asanoha_stack(features=[gate, catalog], settings={"database_pre_ping": False})
    fill_pool(stack, 4)
    end_server_sessions(stack)
    failed = 0
    for _ in range(5):
        try:
            stack.service.dispatch_query(LIST, {}, TestUsers.admin)
        except OperationalError:  # answered 503 service_unavailable over HTTP
            failed += 1
    assert failed >= 1
