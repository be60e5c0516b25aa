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

import redis

#: Seconds the server may take to start or stop.
START_TIMEOUT = 30
#: Ports tried before giving up (another test process took the one picked).
START_ATTEMPTS = 5


class PrivateRedis:
    """A ``redis-server`` on a free port that a test may stop and start again."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.folder = tempfile.mkdtemp(prefix="asanoha-e2e-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self.started_once = False

    @property
    def url(self) -> str:
        """The broker URL of this server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it accepts connections.

        Two test processes (pytest-xdist workers, or suites run side by side) may pick the
        same free port at once; the server that loses the race cannot bind and exits. So the
        server is only taken as up once the one answering on the port is this process: a
        loser starts again on another port (before its first start only; a restart keeps
        its port, which its queues and the test's settings name).
        """
        for _ in range(START_ATTEMPTS):
            if self._start_on_port():
                return
            if self.started_once:
                break
            self.port = _free_port()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _start_on_port(self) -> bool:
        process = subprocess.Popen(
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
        self.process = process
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            if _server_pid(self.port) == process.pid:
                self.started_once = True
                return True
            time.sleep(0.05)
        self.stop()
        return False

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


def _server_pid(port: int) -> int | None:
    """The process id of the Redis server answering on ``port``; ``None`` while none does."""
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=0.2)
    try:
        return int(client.info("server")["process_id"])
    except redis.RedisError:
        return None
    finally:
        client.close()


def _free_port() -> int:
    for _ in range(50):
        port = 6390 + random.randrange(2000)
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port for a private redis-server")
