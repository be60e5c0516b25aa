"""A private PostgreSQL primary and a streaming hot standby of it, for tests that restart their
database: on their own ports and data folders, so the shared server other suites use is never
touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

#: Seconds a server may take to start, stop or restart.
START_TIMEOUT = 60


def _binaries() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").iterdir(), key=lambda p: int(p.name))
    return versions[-1] / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _as_postgres(*command: str) -> None:
    """Run a server command as the ``postgres`` user (``initdb`` and the server refuse root)."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*prefix, *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr or done.stdout}")


class PrivateServer:
    """One ``postgres`` server on a free port with its data in a temporary folder."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = _free_port()

    @property
    def admin_url(self) -> str:
        """A URL of the ``postgres`` database, for creating and inspecting databases."""
        return self.url("postgres")

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def configure(self, *lines: str) -> None:
        settings = [
            f"port = {self.port}",
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.data}'",
            "max_connections = 100",
            "shared_buffers = 32MB",
            "fsync = off",
            *lines,
        ]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(settings) + "\n")

    def start(self) -> None:
        log = self.data.parent / f"{self.data.name}.log"
        _as_postgres(
            str(_binaries() / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(log),
            "-w",
            "-t",
            str(START_TIMEOUT),
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        _as_postgres(str(_binaries() / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


class PrivatePostgres:
    """A primary that streams to one hot standby; ``restart_primary()`` is the fault."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="asanoha-e2e-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self.primary = PrivateServer(self.folder / "primary")
        self.standby = PrivateServer(self.folder / "standby")

    def start(self) -> None:
        """Create and start the primary, then a standby from its base backup."""
        _as_postgres(
            str(_binaries() / "initdb"),
            "-D",
            str(self.primary.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        )
        self.primary.configure(
            "wal_level = replica", "max_wal_senders = 4", "wal_keep_size = 256MB"
        )
        with (self.primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self.primary.start()
        _as_postgres(
            str(_binaries() / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-D",
            str(self.standby.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        # The backup copied the primary's settings; the standby's own come after and win.
        self.standby.configure("hot_standby = on")
        self.standby.start()

    def restart_primary(self) -> None:
        """Stop the primary as an operator's restart does (open transactions roll back,
        clients lose their connections) and start it again."""
        self.primary.stop("fast")
        self.primary.start()

    def close(self) -> None:
        for server in (self.standby, self.primary):
            if server.running():
                with contextlib.suppress(RuntimeError):
                    server.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
