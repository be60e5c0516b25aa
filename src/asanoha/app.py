"""``App``: assembles registry, database, service layer, HTTP app and Celery side."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from asanoha.handlers.agent_approvals import agent_feature
from asanoha.handlers.retention import policies, retention_feature
from asanoha.handlers.workflow_waits import waits_feature, workflows_that_wait
from asanoha.platform.consumers import Consumers
from asanoha.platform.errors import DefinitionError
from asanoha.platform.files import FileLinks, storage_of
from asanoha.platform.model import Feature, RateLimit, Registry
from asanoha.platform.model.sync_callables import check_not_async
from asanoha.platform.personal.boot import key_wrapper_of
from asanoha.platform.schema import (
    DEFAULT_APP_MIGRATIONS,
    SchemaBehindError,
    SchemaUpgrade,
    bring_schema_up_to_date,
)
from asanoha.platform.service import OutboxMessage, Service
from asanoha.platform.service.approvals import approval_key
from asanoha.platform.service.files import Files
from asanoha.platform.service.jobs import Jobs
from asanoha.platform.service.rate_limits import RateLimiter
from asanoha.platform.service.workflows import Workflows
from asanoha.platform.settings import Settings
from asanoha.platform.store import Database, StoredEvent, Tables
from asanoha.platform.store.replica import ReadReplica

if TYPE_CHECKING:
    from celery import Celery
    from fastapi import FastAPI

    from asanoha.platform.identity import TokenVerifier
    from asanoha.workers.celery_app import CeleryJobs
    from asanoha.workers.consumer_wake import ConsumerWaker


log = logging.getLogger("asanoha.app")


class DeferredCeleryPublisher:
    """The service's outbox publisher: builds the application's Celery side on the first
    message (so nothing imports Celery before a job is published) and publishes through it."""

    def __init__(self, app: App) -> None:
        self._app = app

    def publish(self, message: OutboxMessage) -> None:
        """Publish ``message`` through the Celery side's publisher."""
        self._app.celery_jobs.publisher.publish(message)


class App:
    """An application: its features, and the runtime built from them and the settings.

    ``publish_jobs=False`` keeps triggered jobs as job rows only (a test stack without a
    worker reads them; the relay of a worker publishes them later) and sends no consumer
    wake-ups: this process does not talk to the broker.
    """

    def __init__(
        self,
        features: Iterable[Feature],
        settings: Settings | None = None,
        *,
        publish_jobs: bool = True,
        tenants: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        # Every application carries agent:write:approve; its handler reaches this app's
        # approval desk when it runs.
        approvals = agent_feature(
            lambda conn, user, asked: self.service.approvals.mint(conn, user, asked)
        )
        features = list(features)
        bundled = [approvals]
        # An entity whose retention deletes or anonymizes old rows brings the daily job
        # that does it (``handlers/retention.py``), per tenant where the app names them.
        retained = policies(features)
        if retained:
            bundled.append(retention_feature(retained, per_tenant=tenants is not None))
        # A workflow that waits for events brings the consumer that resumes its waits.
        waiting = workflows_that_wait(features)
        if waiting:
            bundled.append(waits_feature(waiting))
        self.registry = Registry([*features, *bundled])
        per_tenant = [job.qn for job in self.registry.jobs if job.per_tenant]
        if per_tenant and tenants is None:
            raise DefinitionError(
                f"{per_tenant[0]} runs per tenant (per_tenant=True): pass "
                "App(..., tenants=<a function returning the tenant ids>)"
            )
        if tenants is not None and not callable(tenants):
            raise DefinitionError(
                f"App(tenants=...) takes a function returning the tenant ids, not {tenants!r}"
            )
        if tenants is not None:
            check_not_async(
                tenants, "App(tenants=...)", "tenants function", "a cron tick asks it in beat"
            )
        #: The tenants a per-tenant cron tick fans out to (``None``: the app declares none).
        self.tenants = tenants
        self.database = Database(
            self.settings.database_url,
            pool_size=self.settings.database_pool_size,
            pre_ping=self.settings.database_pre_ping,
        )
        #: The hot standby that queries declared ``replica=True`` may read from.
        self.replica = (
            ReadReplica(
                self.settings.read_database_url,
                primary=self.database,
                pool_size=self.settings.database_pool_size,
                pre_ping=self.settings.database_pre_ping,
                max_lag=self.settings.replica_max_lag,
            )
            if self.settings.read_database_url
            else None
        )
        # Jobs triggered by a write are published right after its commit, in whatever
        # process made the write (an API server too).
        publisher = DeferredCeleryPublisher(self) if self.registry.jobs and publish_jobs else None
        # Never derived from the public placeholder outside development: then a random key of
        # this process (asanoha serve on the embedded default signs with one of its own).
        approval_secret = self.settings.approval_signing_secret
        if approval_secret is None and self.settings.has_identity_provider:
            # Tokens come from the provider, so no shared secret signs approvals: each
            # process keys its own, and another process refuses an approval this one issued.
            log.warning(
                "ASANOHA_APPROVAL_SECRET is not set: agent approvals are signed with a key of "
                "this process only, which other API processes refuse. Set it to the same "
                "long random value in every process."
            )
        # One counter for handlers and uploads (``Files`` counts these).
        self._limiter = self._rate_limiter()
        self.service = Service(
            self.registry,
            self.database,
            publisher=publisher,
            approval_key=approval_key(approval_secret) if approval_secret else None,
            operator_tenant=self.settings.operator_tenant,
            idempotency_ttl=self.settings.idempotency_ttl,
            idempotency_wait=self.settings.idempotency_wait,
            rate_limiter=self._limiter,
            broker_hold=self._broker_hold,
            key_wrapper=key_wrapper_of(self.settings),
            replica=self.replica,
            files=self._files,
        )
        #: Job operations: cancel, retry, run (the CLI and the bundled handlers use them).
        self.jobs = Jobs(self.service, self.settings.default_tenant)
        #: Workflow runs: start, get, cancel.
        self.workflows = Workflows(self.service, self.settings.default_tenant)
        #: The event consumers, the built-in job-trigger consumer included.
        self.consumers = Consumers(
            self.service, job_trigger_partitions=self.settings.job_trigger_partitions
        )
        if self.consumers and self.settings.consumer_wake and publish_jobs:
            self.service.add_commit_listener(self._wake_consumers)

    def _files(self, tables: Tables) -> Files:
        """The application's files: the storage ``ASANOHA_FILE_STORAGE`` names, links signed
        with a key derived from the token secret, the upload limits of the settings (their
        rate counted by the application's rate limiter)."""
        settings = self.settings
        return Files(
            self.database,
            tables,
            storage_of(settings),
            FileLinks(settings.file_url_signing_secret, settings.file_url_ttl),
            max_bytes=settings.file_max_bytes,
            upload_types=settings.file_upload_types,
            rate_limiter=self._limiter,
        )

    def _rate_limiter(self) -> RateLimiter | None:
        """The Redis counter of rate limits, when a handler declares one or the settings
        give a default or a rate of uploads."""
        settings = self.settings
        default = settings.rate_limit_default
        uploads = settings.file_upload_rate
        limited = [handler.qn for handler in self.registry.handlers if handler.rate_limit]
        limited += [job.qn for job in self.registry.jobs if job.rate_limit]
        if not limited and default is None and uploads is None:
            return None
        url = settings.rate_limit_redis_url
        if url is None:
            setting = "ASANOHA_RATE_LIMIT_DEFAULT" if default else "ASANOHA_FILE_UPLOAD_RATE"
            what = f"{limited[0]} declares rate_limit=" if limited else setting
            raise DefinitionError(
                f"{what}, which is counted in Redis; set ASANOHA_RATE_LIMIT_URL (or a "
                "redis:// ASANOHA_BROKER_URL)"
            )
        return RateLimiter(
            url,
            namespace=settings.queue_prefix,
            default=_setting_limit("ASANOHA_RATE_LIMIT_DEFAULT", default),
            uploads=_setting_limit("ASANOHA_FILE_UPLOAD_RATE", uploads),
        )

    def _broker_hold(self, job_qn: str) -> float:
        """The longest countdown the broker may hold for ``job_qn`` (see ``retry_policy``)."""
        job = self.registry.job(job_qn)
        if job is None:
            return 0.0
        # Imported here: only a process that publishes jobs (and so imports Celery) asks.
        from asanoha.workers.retry_policy import broker_countdown_limit

        return broker_countdown_limit(job, self.settings)

    def _wake_consumers(self, events: Sequence[StoredEvent]) -> None:
        """After a commit: have a worker advance the consumers that follow ``events``."""
        keys = self.consumers.wake_keys(events)
        if keys:
            # Only the partitions the events go to.
            self._consumer_waker.wake(keys, keys)

    @functools.cached_property
    def _consumer_waker(self) -> ConsumerWaker:
        from asanoha.workers.consumer_wake import ConsumerWaker

        return ConsumerWaker(
            lambda names, keys: self.celery_jobs.request_consumer_wakes(names, keys)
        )

    def readiness_checks(self) -> dict[str, Callable[[], str]]:
        """What ``/health/ready`` asks: whether this process can serve calls, that is whether
        the database answers. The job pipeline is not part of it (see ``job_health_checks``):
        a write commits its job rows whatever the broker does.

        Each check returns ``"ok"`` or a short cause, and raises when it cannot reach what it
        checks.
        """
        return {"database": self.database.check}

    def job_health_checks(self) -> dict[str, Callable[[], str]]:
        """What ``/health/jobs`` asks, for alerts and the console: with jobs, whether the broker
        answers, how long the oldest due job has waited to be published, and whether published
        jobs wait unclaimed (their messages lost).

        Checks of the job pipeline go here, in the form of ``readiness_checks``.
        """
        checks: dict[str, Callable[[], str]] = {}
        if self.registry.jobs:
            from asanoha.workers.job_health import (
                check_broker,
                check_job_backlog,
                check_unclaimed_jobs,
            )

            checks["broker"] = lambda: check_broker(self.celery)
            checks["jobs"] = lambda: check_job_backlog(self.database, self.service.tables)
            checks["unclaimed"] = lambda: check_unclaimed_jobs(
                self.database, self.service.tables, self.settings.unclaimed_alert_seconds
            )
        return checks

    def create_schema(self, migrations: Path | None = DEFAULT_APP_MIGRATIONS) -> SchemaUpgrade:
        """Bring the database to the code's schema, as ``asanoha migrate`` does: the platform's
        tables, then the application's migrations in ``migrations`` (relative to the working
        directory) or, while it holds none or with ``migrations=None``, the entity tables that
        do not exist yet; then the cursor rows of new consumers.

        Raises ``SchemaBehindError`` when the database still lacks something the code uses
        (a new column on an existing table without a migration).
        """
        upgrade = bring_schema_up_to_date(
            self.registry,
            self.database,
            migrations=migrations,
            may_change=True,
            job_trigger_partitions=self.settings.job_trigger_partitions,
        )
        if not upgrade.status.is_current:
            raise SchemaBehindError(upgrade.status)
        return upgrade

    @functools.cached_property
    def tokens(self) -> TokenVerifier:
        """Checks bearer tokens (own, the identity provider's, personal access tokens,
        revocations) and signs the platform's own. Built on first use: a worker never
        checks a token."""
        from asanoha.platform.identity import TokenVerifier
        from asanoha.platform.identity.access_tokens import AccessTokenStore
        from asanoha.platform.identity.revocations import RevocationList

        tables = self.service.tables
        revocations = RevocationList(self.database, tables.token_revocations)
        return TokenVerifier(
            self.settings,
            revocations=revocations,
            access_tokens=AccessTokenStore(self.database, tables.access_tokens, revocations),
        )

    @functools.cached_property
    def http(self) -> FastAPI:
        """The FastAPI application, with the MCP server at ``/mcp``."""
        return self.build_http()

    def build_http(self) -> FastAPI:
        """A new FastAPI application of this app (``http`` is the one the app keeps)."""
        from asanoha.agents import McpCallers, build_mcp_server
        from asanoha.agents.mcp_http import McpHttpEndpoint
        from asanoha.platform.http import build_http_app
        from asanoha.platform.http.mounts import AsgiMount

        endpoint = McpHttpEndpoint(
            build_mcp_server(self.service, McpCallers(self.tokens)), self.settings, self.tokens
        )
        return build_http_app(self, [AsgiMount("/mcp", endpoint, endpoint.lifespan)])

    @functools.cached_property
    def celery_jobs(self) -> CeleryJobs:
        """The Celery side: Celery app, publisher, attempt runner, relay, probes, outcomes."""
        from asanoha.workers import make_celery

        return make_celery(self)

    @property
    def celery(self) -> Celery:
        """The Celery application."""
        return self.celery_jobs.celery

    @property
    def user_options(self) -> NoReturn:
        """Refuses Celery's command line: ``celery -A shop`` finds this ``App`` as ``shop.app``
        and reads ``user_options`` from it first, so this is where it learns what to run."""
        import click

        raise click.UsageError(
            "this is an asanoha App, not a Celery app. Run 'asanoha worker --app MODULE:app' "
            "(or 'asanoha beat', 'asanoha celery --app MODULE:app -- COMMAND'), or give Celery "
            "the Celery app: put 'celery = app.celery' in the module and run "
            "'celery -A MODULE:celery worker'."
        )

    def close(self) -> None:
        """Release the database pool, and the Celery side when it was built."""
        waker = self.__dict__.get("_consumer_waker")
        if waker is not None:
            waker.close()
        jobs = self.__dict__.get("celery_jobs")
        if jobs is not None:
            jobs.close()
            jobs.celery.close()
        if self.replica is not None:
            self.replica.dispose()
        self.database.dispose()
        if "http" in self.__dict__:
            from asanoha.platform.http.route_caches import release_route_functions

            # Its routes close over this app: FastAPI's caches would keep it alive.
            release_route_functions()


def _setting_limit(variable: str, rate: str | None) -> RateLimit | None:
    """The rate of the setting ``variable`` as a limit per user; a wrong rate names it."""
    if rate is None:
        return None
    try:
        return RateLimit(rate)
    except DefinitionError:
        raise DefinitionError(
            f"{variable}={rate!r} is no rate; write it as '100/minute', '5/second' or '1000/day'"
        ) from None
