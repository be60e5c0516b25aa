"""Testing a pooled Postgres connection before it is handed out, with a round trip only when
the connection may be dead.

SQLAlchemy's ``pool_pre_ping`` sends a query on every checkout: one round trip more per
transaction, about a sixth of a short write's time on a busy pool. Most of that protects
nothing: a connection that came back to the pool a moment ago is alive unless the server
ended its session since, and a server that ends a session (a restart, a failover,
``pg_terminate_backend``, ``idle_session_timeout``) says so on the socket, which then has
something to read although the connection sits idle. So a checkout

- asks the socket, without a round trip, whether anything arrived while the connection was
  idle: if so, it pings;
- pings a connection idle for longer than ``PING_AFTER_IDLE``, the one case the socket cannot
  tell: a network that drops idle connections silently;
- hands out a connection fresh from connecting, or back in the pool for less than that with
  nothing to read, as it is.

A failed ping invalidates every pooled connection made before it (as SQLAlchemy's pre-ping
does: a restart killed them all) and the pool connects afresh.
"""

from __future__ import annotations

import select
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import InvalidatePoolError
from sqlalchemy.pool import ConnectionPoolEntry

#: Seconds a connection may sit in the pool and still be handed out without a ping when its
#: socket has nothing to read. Networks that drop idle connections do so after minutes.
PING_AFTER_IDLE = 10.0
#: ``ConnectionPoolEntry.info`` key: when the connection came back to the pool (the dict is
#: the DBAPI connection's own: a reconnected entry starts without it, as fresh).
_CHECKED_IN = "asanoha.checked_in"


def check_before_use(engine: Engine) -> None:
    """Test ``engine``'s pooled connections on checkout as the module docstring says."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def note_checkin(dbapi_connection: Any, entry: ConnectionPoolEntry) -> None:
        if dbapi_connection is not None:
            entry.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def check_on_checkout(dbapi_connection: Any, entry: ConnectionPoolEntry, _: Any) -> None:
        checked_in = entry.info.get(_CHECKED_IN)
        if checked_in is None:
            return  # fresh from connecting
        idle = time.monotonic() - checked_in
        if idle <= PING_AFTER_IDLE and not has_input(dbapi_connection):
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            raise InvalidatePoolError() from error


def has_input(dbapi_connection: Any) -> bool:
    """Whether an idle connection's socket has something to read (the server's last words,
    or its end of the connection); ``True`` when the socket cannot be asked."""
    try:
        descriptor = dbapi_connection.fileno()
    except Exception:
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
