"""A private ``redis-server`` for tests that stop, pause or restart their broker (its own
port: no other test's workers, unacked sweeps or mutexes share it)."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

#: Seconds the server may take to start or stop.
START_TIMEOUT = 30


class PrivateRedis:
    """A ``redis-server`` on a free port that a test may stop and start again."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.folder = tempfile.mkdtemp(prefix="asanoha-e2e-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The broker URL of this server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.folder,
                "--save",
                "",
                # Production runs Redis with AOF; so does this one, so a restart keeps the
                # queues as they were.
                "--appendonly",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        """Stop the server (it flushes its AOF on SIGTERM)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=START_TIMEOUT)
        self.process = None

    def pause(self) -> None:
        """Freeze the server: connections stay open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused server answer again."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """Stop the server and remove its files."""
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _free_port() -> int:
    for _ in range(50):
        port = 6390 + random.randrange(2000)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port for a private redis-server")
