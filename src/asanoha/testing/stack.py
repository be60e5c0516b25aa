"""``Stack``: one application with its own database and queue names, for one test."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from asanoha.app import App
from asanoha.platform.consumers import Consumers, drain_consumers
from asanoha.platform.jobs import control
from asanoha.platform.model import Feature, Registry, SessionUser
from asanoha.platform.personal.master_keys import generate_master_key
from asanoha.platform.service import Service
from asanoha.platform.settings import Settings
from asanoha.platform.store import Database, Tables
from asanoha.testing.databases import DatabaseKind, TestDatabase
from asanoha.testing.http_client import StackHttp, TestClient
from asanoha.testing.statements import capture_writes

if TYPE_CHECKING:
    from asanoha.workers.runtime import JobRuntime

DEFAULT_TEST_BROKER_URL = "redis://127.0.0.1:6379/0"
DEFAULT_TEST_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"


def broker_url_for_tests() -> str:
    """The Redis broker of test stacks: ``ASANOHA_TEST_BROKER_URL`` or the local one (its
    database number confines the suite when another suite shares the server)."""
    return os.environ.get("ASANOHA_TEST_BROKER_URL") or DEFAULT_TEST_BROKER_URL


def amqp_url_for_tests() -> str:
    """The RabbitMQ broker of the tests that run on it: ``ASANOHA_TEST_AMQP_URL`` or the local
    one (a vhost of its own confines the suite)."""
    return os.environ.get("ASANOHA_TEST_AMQP_URL") or DEFAULT_TEST_AMQP_URL


SettingsOverride = Settings | Mapping[str, Any] | None


def stack_settings(database_url: str, suffix: str, settings: SettingsOverride) -> Settings:
    """Settings of a stack: its database and queue prefix always; the rest overridable.

    ``settings`` may be a ``Settings`` (used as is, apart from database and queue prefix) or
    a mapping of field overrides on top of the stack defaults.
    """
    isolated = {"database_url": database_url, "queue_prefix": f"asanoha-t-{suffix}"}
    if isinstance(settings, Settings):
        return settings.model_copy(update=isolated)
    defaults: dict[str, Any] = {
        "broker_url": broker_url_for_tests(),
        "jwt_secret": secrets.token_urlsafe(32),
        # Personal values are sealed in tests as in production.
        "master_key": generate_master_key(),
        # Uploads go to a folder of the stack's own, removed with it.
        "file_dir": os.path.join(tempfile.gettempdir(), f"asanoha-files-{suffix}"),
    }
    return Settings(**{**defaults, **dict(settings or {}), **isolated})


def _with_replica(settings: SettingsOverride, replica_url: str) -> SettingsOverride:
    """``settings`` that read queries declared ``replica=True`` from ``replica_url``."""
    if isinstance(settings, Settings):
        return settings.model_copy(update={"read_database_url": replica_url})
    return {**dict(settings or {}), "read_database_url": replica_url}


class Stack:
    """An application on a fresh database, reached in-process over HTTP.

    Build it with the ``asanoha_stack`` fixture; it is torn down after the test.
    """

    def __init__(
        self,
        features: Iterable[Feature],
        *,
        jobs: bool = False,
        settings: SettingsOverride = None,
        database: DatabaseKind = "postgres",
        tenants: Callable[[], Iterable[str]] | None = None,
        replica: bool = False,
    ) -> None:
        suffix = secrets.token_hex(6)
        # The platform's tables come with the database (a copy of the run's template); the
        # schema step below adds the features' tables and checks the whole.
        self._database = TestDatabase.create(
            database, f"asanoha_t_{suffix}", with_platform_tables=True
        )
        if replica:
            settings = _with_replica(settings, self._database.replica_url)
        self._jobs: JobRuntime | None = None
        self._client: TestClient | None = None
        try:
            # Without jobs no worker consumes this stack's queues: triggered jobs stay job
            # rows (tests can read them) instead of messages nobody will take.
            self.app = App(
                features,
                stack_settings(self._database.url, suffix, settings),
                publish_jobs=jobs,
                tenants=tenants,
            )
            # The stack's tables come from its features, never from a project's migrations
            # folder in the working directory.
            self.app.create_schema(migrations=None)
            if replica:
                self.wait_for_replica()
            self._client = TestClient(self.app.http)
            self._client.__enter__()
            self.http = StackHttp(self._client, self.app.settings)
            if jobs:
                # Imported here so the plugin works in projects that never start workers.
                from asanoha.workers.runtime import JobRuntime

                self._jobs = JobRuntime.start(self.app)
        except BaseException:
            self.close()
            raise

    # -- parts ------------------------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """The registry of the stack's features."""
        return self.app.registry

    @property
    def db(self) -> Database:
        """The stack's database."""
        return self.app.database

    @property
    def service(self) -> Service:
        """The service layer (dispatch without HTTP)."""
        return self.app.service

    @property
    def tables(self) -> Tables:
        """The SQLAlchemy tables of the stack."""
        return self.app.service.tables

    @property
    def database_name(self) -> str:
        """The name of the stack's own database."""
        return self._database.name

    # -- operations -------------------------------------------------------------------------

    def reset(self) -> None:
        """Empty every table (platform and entities); ``drain()`` forgets the job runs it saw."""
        with self.db.begin() as conn:
            for table in reversed(self.tables.metadata.sorted_tables):
                conn.execute(table.delete())
        if self._jobs is not None:
            self._jobs.forget_runs()

    def capture_writes(self) -> contextlib.AbstractContextManager[list[str]]:
        """Collect every INSERT/UPDATE/DELETE the stack's engine sends while the block runs."""
        return capture_writes(self.db.engine)

    def row_counts(self) -> dict[str, int]:
        """Rows of the event store, outbox, job runs and every entity table (``feature:name``)."""
        tables = {
            "events": self.tables.events,
            "outbox": self.tables.outbox,
            "job_runs": self.tables.job_runs,
            **self.tables.entities,
        }
        with self.db.connect() as conn:
            return {
                name: conn.execute(select(func.count()).select_from(table)).scalar_one()
                for name, table in tables.items()
            }

    @contextlib.contextmanager
    def nothing_written(self) -> Iterator[None]:
        """Fail unless the block sends no INSERT/UPDATE/DELETE and leaves every count as it was.

        For denied calls: wrap the call (and its ``pytest.raises``) in this block.
        """
        before = self.row_counts()
        with self.capture_writes() as statements:
            yield
        assert statements == [], f"writes were sent: {statements}"
        assert self.row_counts() == before

    def wait_for_replica(self, timeout: float = 30) -> None:
        """Wait until the read replica has replayed every write committed so far."""
        replica = self.app.replica
        if replica is None:
            raise RuntimeError("this stack has no read replica; create it with replica=True")
        position = replica.commit_position()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if replica.has_replayed(position):
                    return
            except OperationalError:
                pass  # the database itself is not replayed yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"the read replica did not replay {position} in {timeout} s")
            time.sleep(0.02)

    @property
    def consumers(self) -> Consumers:
        """The application's consumers: ``run_once()``, ``status()``, ``restart``, ``skip``."""
        return self.app.consumers

    def drain(self, timeout: float = 10) -> Any:
        """Wait until every job and consumer has settled (see ``JobRuntime.drain``).

        Without ``jobs=True`` it advances the application's own consumers until none is
        behind, and runs no job.
        """
        if self._jobs is None and self.app.consumers.user_defined:
            return drain_consumers(self.app.consumers, timeout)
        return self._runtime().drain(timeout)

    def advance_clock(self, seconds: float) -> int:
        """Bring every job row whose time has not come ``seconds`` nearer, as if that much
        time had passed: a ``delay=``, a workflow's sleep, a retry's backoff, a debounce
        window; the next ``drain()`` runs what became due. Other clocks (``unique_for``, rate
        limits, token expiry) keep the wall clock. Returns how many rows moved."""
        if seconds <= 0:
            raise ValueError("advance_clock: seconds must be positive")
        with self.app.database.begin() as conn:
            return control.bring_forward(conn, self.app.service.tables, seconds)

    def dispatch_job(
        self,
        qn: str,
        payload: Mapping[str, Any] | None = None,
        user: SessionUser | None = None,
        *,
        delay: float | None = None,
        at: dt.datetime | None = None,
        priority: int | None = None,
    ) -> Any:
        """Dispatch the job ``qn`` by hand; it starts after ``delay`` seconds or at ``at``,
        with ``priority`` (0..9) instead of the job's own."""
        return self._runtime().dispatch(
            qn, dict(payload or {}), user, delay=delay, at=at, priority=priority
        )

    def _runtime(self) -> JobRuntime:
        if self._jobs is None:
            raise RuntimeError(
                "this stack runs no jobs; create it with asanoha_stack(features=[...], jobs=True)"
            )
        return self._jobs

    def close(self) -> None:
        """Stop the jobs, release connections and drop the database."""
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(self._database.drop)
            if hasattr(self, "app") and self.app.settings.file_storage == "local":
                folder = self.app.settings.file_dir
                if folder is not None and os.path.basename(folder).startswith("asanoha-files-"):
                    cleanup.callback(shutil.rmtree, folder, True)
            if hasattr(self, "app"):
                cleanup.callback(self.app.close)
            if self._client is not None:
                cleanup.callback(self._client.__exit__, None, None, None)
            if self._jobs is not None:
                cleanup.callback(self._jobs.stop)
            self._jobs = None
            self._client = None
