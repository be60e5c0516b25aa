"""Database failures that are not the caller's fault map to 503 or 409, in one place."""

from __future__ import annotations

from pathlib import Path

import psycopg.errors
import pytest
from sqlalchemy import create_engine, exc, text

from asanoha.platform.errors import ConflictError, ServiceUnavailableError
from asanoha.platform.errors.database import database_failure


def wrapped(error: Exception) -> exc.DBAPIError:
    return exc.DBAPIError.instance("SELECT 1", {}, error, psycopg.Error)


@pytest.mark.parametrize(
    "error", [psycopg.errors.DeadlockDetected(), psycopg.errors.SerializationFailure()]
)
def test_a_lost_transaction_is_a_retryable_409(error: Exception) -> None:
    failure = database_failure(wrapped(error))
    assert isinstance(failure, ConflictError)
    assert (failure.http_status, failure.reason) == (409, "transaction_conflict")
    assert failure.details["retryable"] is True


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.AdminShutdown(),
        psycopg.errors.TooManyConnections(),
        psycopg.OperationalError(),
    ],
)
def test_a_server_that_cannot_serve_is_a_retryable_503(error: Exception) -> None:
    failure = database_failure(wrapped(error))
    assert isinstance(failure, ServiceUnavailableError)
    assert (failure.http_status, failure.reason) == (503, "service_unavailable")
    assert failure.details["retryable"] is True


def test_bugs_stay_internal_errors() -> None:
    assert database_failure(wrapped(psycopg.errors.UndefinedTable())) is None
    assert database_failure(RuntimeError("no database involved")) is None


def test_a_locked_sqlite_database_is_a_503(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.sqlite3'}"
    holder = create_engine(url, connect_args={"isolation_level": None})
    waiter = create_engine(url, connect_args={"isolation_level": None, "timeout": 0})
    with holder.connect() as held, waiter.connect() as blocked:
        held.exec_driver_sql("BEGIN IMMEDIATE")
        with pytest.raises(exc.OperationalError) as raised:
            blocked.execute(text("BEGIN IMMEDIATE"))
        held.exec_driver_sql("ROLLBACK")
    failure = database_failure(raised.value)
    assert isinstance(failure, ServiceUnavailableError)
    assert failure.details["code"] == "SQLITE_BUSY"
    holder.dispose()
    waiter.dispose()
