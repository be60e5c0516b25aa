"""Several API processes on one port: uvicorn's worker supervisor, on a listener whose
connections get ``TCP_NODELAY``."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uvicorn import Config


def run_api_workers(
    import_string: str, *, host: str, port: int, workers: int, **server: Any
) -> None:
    """Serve the ASGI app that the factory ``import_string`` builds from ``workers``
    processes sharing one listening socket, until stopped (SIGINT/SIGTERM); ``server`` are
    further ``uvicorn.Config`` settings."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        import_string, factory=True, host=host, port=port, workers=workers, **server
    )
    Multiprocess(config, sockets=[tcp_listener(config)]).run()


def tcp_listener(config: Config) -> socket.socket:
    """uvicorn's listening socket, marked as TCP.

    uvicorn binds it with protocol 0; accepted connections inherit that, and asyncio turns
    on ``TCP_NODELAY`` only for sockets that say ``IPPROTO_TCP``. Without it, each
    keep-alive request after the first waits for the client's delayed ACK (about 40 ms on
    Linux): two workers answered ten times slower than one.
    """
    bound = config.bind_socket()
    if bound.family not in (socket.AF_INET, socket.AF_INET6):
        return bound
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
