"""Prefork pool children: their own database connections, and the parent's objects shared."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from celery import signals

from asanoha.platform.model import Feature

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
