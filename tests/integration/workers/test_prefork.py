"""Prefork pool children: their own database connections, and the parent's objects shared."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from celery import signals

from asanoha.platform.model import Feature
from tests.integration.workers.conftest import database_backends, wait_until

feature = Feature("prefork")


@feature.job("noop", manual=True)
def noop(payload: dict[str, Any], ctx: Any) -> None:
    return None


def test_a_pool_child_opens_its_own_connections_and_leaves_the_parents_open(
    asanoha_stack: Callable[..., Any],
) -> None:
    stack = asanoha_stack(features=[feature])
    stack.app.celery  # noqa: B018 - building it connects the worker signal receivers
    with stack.db.connect() as conn:
        inherited = conn.connection.driver_connection
    signals.worker_process_init.send(sender="test")
    with stack.db.connect() as conn:
        own = conn.connection.driver_connection
    assert own is not inherited
    # Closing it would end the parent's session on the shared socket too.
    assert not inherited.closed
    inherited.close()


def test_the_parent_freezes_its_objects_before_forking_a_pool_child(
    asanoha_stack: Callable[..., Any],
) -> None:
    stack = asanoha_stack(features=[feature])
    stack.app.celery  # noqa: B018
    try:
        signals.worker_before_create_process.send(sender="test")
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_relay_keeps_one_connection_across_passes_and_a_pool_child_drops_it(
    asanoha_stack: Callable[..., Any],
) -> None:
    """A connection per pass would open a database session every second on every worker;
    the one the relay keeps is inherited by a pool child unclosed, and closed at stop."""
    stack = asanoha_stack(features=[feature])
    relay = stack.app.celery_jobs.relay
    before = database_backends(stack)
    relay.relay_once()
    kept = database_backends(stack) - before
    assert len(kept) == 1
    relay.relay_once()
    relay.relay_once()
    assert database_backends(stack) - before == kept
    signals.worker_process_init.send(sender="test")
    # Dropped, not closed: the session is the parent's.
    inherited = database_backends(stack)
    assert kept <= inherited
    relay.relay_once()
    (own,) = database_backends(stack) - inherited
    relay.stop()
    wait_until(lambda: own not in database_backends(stack))
