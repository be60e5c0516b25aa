"""``Service``: the single entry of every write and query (HTTP, jobs, consumers, agent tools).

A top-level write reads as named steps over one ``Request``: admit (resolve, access,
validate) -> open the request (entry handler, origin) -> run the handler (the executor records
events and projects rows) -> enqueue triggered jobs -> commit -> publish. Nested writes get the
parent request explicitly and run in a savepoint of its transaction.

This module builds the service's parts and is the entry to them: writes run in
``write_pipeline``, queries in ``query_pipeline``, what follows a commit in ``after_commit``.
It hands out the entity executor and reader, starts jobs and workflow runs, and opens units of
work; a write asked for inside a query is refused here (``gates.check_write_allowed``).
"""

from __future__ import annotations

import datetime as dt
import functools
import secrets
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection

from asanoha.platform.jobs import publishing
from asanoha.platform.model import EntityDef, HandlerDef, Registry, SessionUser, to_kebab
from asanoha.platform.model.canvas import Canvas
from asanoha.platform.personal.master_keys import KeyWrapper
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.personal.vault import attach as attach_personal_data
from asanoha.platform.service import (
    gates,
    idempotency,
    job_pauses,
    outbox,
)
from asanoha.platform.service.admission import Admission
from asanoha.platform.service.after_commit import AfterCommit, CommitListener
from asanoha.platform.service.aggregates import Aggregates
from asanoha.platform.service.approvals import Approvals, ApprovalSigner
from asanoha.platform.service.domain_events import DomainEvents
from asanoha.platform.service.entity_reader import EntityReader, ExecutorEnv
from asanoha.platform.service.executor import EntityExecutor
from asanoha.platform.service.feature_settings import FeatureSettings
from asanoha.platform.service.files import Files
from asanoha.platform.service.handler_context import QueryContext, WriteContext
from asanoha.platform.service.instruction_reads import InstructionReads
from asanoha.platform.service.job_enqueue import JobEnqueuer
from asanoha.platform.service.keyed_writes import KeyedWrites
from asanoha.platform.service.outbox import OutboxPublisher
from asanoha.platform.service.ownership import OwnerRules
from asanoha.platform.service.query_pipeline import QueryPipeline
from asanoha.platform.service.rate_limits import RateLimiter
from asanoha.platform.service.request import (
    Acting,
    Request,
    RequestMeta,
    WriteOrigin,
    principal_kind,
)
from asanoha.platform.service.write_pipeline import WritePipeline
from asanoha.platform.service.write_plan import WritePlan
from asanoha.platform.store import Database, Tables, build_tables
from asanoha.platform.store.replica import ReadAfter, ReadReplica


class Service:
    """The service layer of one application."""

    def __init__(
        self,
        registry: Registry,
        database: Database,
        tables: Tables | None = None,
        *,
        publisher: OutboxPublisher | None = None,
        approval_key: bytes | None = None,
        operator_tenant: str | None = None,
        idempotency_ttl: float = 86400.0,
        idempotency_wait: float = 10.0,
        rate_limiter: RateLimiter | None = None,
        broker_hold: Callable[[str], float] | None = None,
        key_wrapper: KeyWrapper | None = None,
        replica: ReadReplica | None = None,
        files: Callable[[Tables], Files] | None = None,
    ) -> None:
        self.registry = registry
        #: Lane -> the QNs of its jobs (a paused lane pauses them).
        self.job_lanes = job_pauses.lanes_of(registry)
        #: Counts the calls of handlers that declare ``rate_limit=`` (Redis).
        self.rate_limiter = rate_limiter
        #: job qn -> the longest countdown the broker may hold for it; a job delayed longer
        #: waits in its row for the relay (without: every delayed job waits in its row).
        self.broker_hold = broker_hold or (lambda job_qn: 0.0)
        #: The tenant that operates the whole application (``ASANOHA_OPERATOR_TENANT``).
        self.operator_tenant = operator_tenant
        self.database = database
        self.tables = tables or build_tables(registry)
        #: Uploaded files: their storage, download links and upload limits (``files``).
        self.files = (files or _default_files(database))(self.tables)
        #: Runs writes under their callers' idempotency keys (``keyed_writes``); a repeat's
        #: answer shows its files with links minted again.
        self.keyed = KeyedWrites(
            database,
            self.tables,
            ttl_seconds=idempotency_ttl,
            wait_seconds=idempotency_wait,
            files=self.files,
        )
        self.publisher = publisher
        #: How personal values are stored: sealed under per-subject keys that ``key_wrapper``
        #: wraps; without one (development only) as they are.
        self.personal = PersonalData(key_wrapper, self.tables, database.backend)
        attach_personal_data(self.personal, database.engine)
        #: The read replica of queries declared ``replica=True`` (``None``: none configured).
        self.replica = replica
        if replica is not None:
            attach_personal_data(self.personal, replica.database.engine)
        # Without a configured key (a bare Service in one process) a random one: tokens then
        # hold only in this process.
        signer = ApprovalSigner(approval_key or secrets.token_bytes(32))
        self.approvals = Approvals(signer, registry, self.tables)
        #: Whose rows each caller reaches, from the entities' standard handlers (``ownership``).
        self.owner_rules = OwnerRules(registry)
        #: What the entity executor works with (never the Service itself).
        self.executor_env = ExecutorEnv(
            registry, self.tables, self.personal, self.owner_rules, database.backend, self.files
        )
        #: Places job rows in write transactions (``job_enqueue``).
        self.jobs_enqueue = JobEnqueuer(registry, self.tables, self.broker_hold)
        #: Appends handlers' declared domain events (``ctx.append_event``).
        self.domain_events = DomainEvents(
            registry, self.tables, database.backend, self.personal, self.owner_rules
        )
        #: Folds the declared aggregates (``ctx.load``).
        self.aggregates = Aggregates(registry, self.tables, database.backend)
        #: What follows every commit: publish, commit listeners, hooks (``after_commit``).
        self.committed = AfterCommit(registry, database, self.tables, self.files)
        # Resolved once per process: the registry and its definitions do not change.
        self._entity_defs: dict[tuple[str, str], EntityDef] = {}
        #: Features' configuration, secrets and switches per tenant (``feature_settings``).
        self.feature_settings = FeatureSettings(registry, self.tables, self.personal, database)
        #: The first steps of every dispatch (``admission``).
        self.admission = Admission(registry, rate_limiter, self.feature_settings)
        #: Runs every write through its handler's plan (``write_pipeline``).
        self.writes = WritePipeline(
            registry=registry,
            database=database,
            admission=self.admission,
            keyed=self.keyed,
            approvals=self.approvals,
            jobs=self.jobs_enqueue,
            context=lambda request, handler, user: WriteContext(self, request, handler, user),
            after_commit=self.after_commit,
        )
        #: Runs every query, on the primary or the read replica (``query_pipeline``).
        self.queries = QueryPipeline(
            registry=registry,
            database=database,
            replica=replica,
            admission=self.admission,
            context=lambda request, handler, user: QueryContext(self, request, handler, user),
        )

    # -- writes -----------------------------------------------------------------------------

    def dispatch_write(
        self,
        qn: str,
        payload: Any,
        user: SessionUser,
        *,
        parent: Request | None = None,
        meta: RequestMeta | None = None,
        origin: WriteOrigin | None = None,
        acting: Acting | None = None,
        approval: str | None = None,
        reads: InstructionReads | None = None,
        idempotency_key: str | None = None,
        replay: idempotency.Replay | None = None,
    ) -> Any:
        """Run the write handler ``qn`` for ``user`` and return its data: its plan, through
        the write pipeline (see ``WritePipeline.write``)."""
        return self.writes.write(
            qn,
            payload,
            user,
            parent=parent,
            meta=meta,
            origin=origin,
            acting=acting,
            approval=approval,
            reads=reads,
            idempotency_key=idempotency_key,
            replay=replay,
        )

    def dispatch_batch(
        self,
        items: Sequence[tuple[str, Any]],
        user: SessionUser,
        *,
        meta: RequestMeta | None = None,
        idempotency_key: str | None = None,
        replay: idempotency.Replay | None = None,
    ) -> list[Any]:
        """Run several writes in one transaction (see ``WritePipeline.batch``)."""
        return self.writes.batch(
            items, user, meta=meta, idempotency_key=idempotency_key, replay=replay
        )

    def plan_of(self, handler: HandlerDef) -> WritePlan:
        """The write plan of ``handler`` (see ``write_plan``), made once."""
        return self.writes.plan_of(handler)

    @contextmanager
    def unit_of_work(
        self,
        user: SessionUser,
        *,
        origin: WriteOrigin | None = None,
        meta: RequestMeta | None = None,
        conn: Connection | None = None,
        acting: Acting | None = None,
    ) -> Iterator[Request]:
        """A write request without an entry handler: the unit of work of a job or consumer
        (``acting``, which the gates read).

        On its own transaction it commits and publishes when the block exits; on ``conn`` (the
        caller's open transaction) the caller commits and then calls ``after_commit``.
        """
        origin = origin or WriteOrigin()
        if conn is not None:
            yield Request(conn, user, "write", None, origin, meta or RequestMeta(), acting=acting)
            return
        with self.database.begin() as own:
            request = Request(
                own, user, "write", None, origin, meta or RequestMeta(), acting=acting
            )
            yield request
        self.after_commit(request)

    def after_commit(self, request: Request) -> None:
        """Publish the request's outbox rows and tell the commit listeners. Never raises: the
        write has committed, so its caller gets its result; what fails is left to the relay
        (see ``after_commit``)."""
        self.committed.run(request, self.publisher)

    # -- queries ----------------------------------------------------------------------------

    def dispatch_query(
        self,
        qn: str,
        payload: Any,
        user: SessionUser,
        *,
        parent: Request | None = None,
        meta: RequestMeta | None = None,
        reads: InstructionReads | None = None,
        read_after: ReadAfter | None = None,
    ) -> Any:
        """Run the query handler ``qn`` for ``user`` and return its data.

        Without ``parent`` it reads in its own read-only transaction and is the entry handler;
        with ``parent`` it reads through the parent's transaction (its own writes included).
        ``reads`` collects the instruction fields the query reads. ``read_after``: the caller
        may be served by the read replica, if the handler is declared ``replica=True`` and
        the replica has replayed the caller's last write (see ``store.replica``); without
        it, the primary serves.
        """
        return self.queries.query(
            qn, payload, user, parent=parent, meta=meta, reads=reads, read_after=read_after
        )

    def commit_position(self) -> str | None:
        """Where the primary's log stands after the caller's writes, for the caller's next
        ``read_after``; ``None`` without a read replica."""
        return self.replica.commit_position() if self.replica is not None else None

    # -- entities, events and jobs ----------------------------------------------------------

    def entity_def(self, name: str, *, feature: str, caller: str) -> EntityDef:
        """Entity ``name`` of ``feature``, or ``other-feature:name``; ``caller`` names who asked."""
        # The conversion of registration: crud("promptNote") is found as "promptNote",
        # "prompt_note" or "prompt-note", in this feature or as "other:promptNote".
        found = self._entity_defs.get((name, feature))
        if found is not None:
            return found
        scope, _, local = name.rpartition(":")
        key = f"{scope or feature}:{to_kebab(local)}"
        entity_def = self.registry.find_entity(key)
        if entity_def is None:
            raise LookupError(f"{caller}: no entity {name!r} is registered (looked for {key!r})")
        self._entity_defs[name, feature] = entity_def
        return entity_def

    def reader(
        self, request: Request, name: str, user: SessionUser, *, feature: str, caller: str
    ) -> EntityReader:
        """Reads of entity ``name`` for ``user`` inside ``request``."""
        entity_def = self.entity_def(name, feature=feature, caller=caller)
        return EntityReader(self.executor_env, request.conn, entity_def, user, request, caller)

    def executor(
        self, request: Request, name: str, user: SessionUser, *, feature: str, caller: str
    ) -> EntityExecutor:
        """The entity executor of ``name`` for ``user`` inside the write ``request``."""
        gates.check_write_allowed(request, "entity", name)
        entity_def = self.entity_def(name, feature=feature, caller=caller)
        return EntityExecutor(self.executor_env, request.conn, entity_def, user, request, caller)

    def start_workflow(
        self,
        workflow_qn: str | Canvas,
        payload: dict[str, Any] | None,
        user: SessionUser,
        *,
        parent: Request | None = None,
        trigger_name: str = "manual",
        origin: WriteOrigin | None = None,
    ) -> uuid.UUID:
        """Start a run of ``workflow_qn`` on ``payload`` (or of a canvas over declared jobs,
        ``model/canvas``): inside ``parent``'s transaction (its first steps published when
        it commits), else on its own; the run's id. ``origin`` is the chain the caller acts
        for: every step carries it. Raises ``NotFoundError`` (404 ``workflow_not_found``;
        ``job_not_found`` for a canvas naming an undeclared job)."""
        workflow, payload = self.jobs_enqueue.check_workflow(workflow_qn, payload)
        if parent is not None:
            gates.check_write_allowed(parent, "start_workflow", workflow.qn)
            return self.jobs_enqueue.start_workflow(
                parent, workflow, dict(payload), user, trigger_name=trigger_name
            )
        if origin is None and user.is_agent:
            # An agent that starts a run itself begins its chain: every step acts for it,
            # held to what an agent's call below ``high`` may do, and it never approves it.
            origin = WriteOrigin(
                root_qn=workflow.qn,
                principal=user.id,
                principal_kind=principal_kind(user),
                agent_run=user.agent,
            )
        with self.unit_of_work(user, origin=origin) as request:
            return self.jobs_enqueue.start_workflow(
                request, workflow, dict(payload), user, trigger_name=trigger_name
            )

    def enqueue_job(
        self,
        job_qn: str,
        payload: dict[str, Any],
        user: SessionUser,
        *,
        parent: Request | None = None,
        trigger_name: str = "manual",
        origin: WriteOrigin | None = None,
        idempotency_key: str | None = None,
        trigger_event_id: int | None = None,
        delay: float | None = None,
        at: dt.datetime | None = None,
        manual: bool = True,
        publish: bool = True,
        priority: int | None = None,
    ) -> uuid.UUID:
        """Enqueue ``job_qn`` through the outbox: inside ``parent``'s transaction (published
        when it commits), else on its own. ``origin`` is the chain the caller acts for.

        With ``idempotency_key``, a second enqueue with the same key enqueues nothing and
        returns the first job's id. ``trigger_event_id`` is the stored event that triggered
        the job (its ``ctx.trigger_event``). ``delay`` (seconds) or ``at`` (an aware
        datetime) hold its first attempt back: the broker holds a short wait, the row a
        longer one (the relay publishes it when it is due).

        ``manual`` (every caller but the platform's own triggers: cron ticks, events): the
        payload is validated against the job's ``schema=`` (400 ``validation_error`` with
        the field errors) and stored as validated. ``publish=False`` leaves the row to the
        relay (a process whose broker reaches no worker). ``priority`` (0..9) overrides the
        job's declared ``priority=`` for this run.
        """
        if parent is not None:
            gates.check_write_allowed(parent, "dispatch", job_qn)
        asked = self.jobs_enqueue.check(
            job_qn, payload, delay=delay, at=at, manual=manual, priority=priority
        )
        place = functools.partial(
            self.jobs_enqueue.place,
            asked=asked,
            user=user,
            trigger_name=trigger_name,
            idempotency_key=idempotency_key,
            trigger_event_id=trigger_event_id,
            publish=publish,
            priority=priority,
        )
        if parent is not None:
            return place(parent)
        with self.unit_of_work(user, origin=origin) as request:
            return place(request)

    def relay_outbox(self, limit: int = 100) -> int:
        """Publish due job rows nobody published; return how many were sent."""
        if self.publisher is None:
            return 0
        with self.database.connect() as conn:
            paused = job_pauses.paused_job_qns(conn, self.tables, self.job_lanes)
        return publishing.relay_outbox(
            self.database, self.tables, self.publisher, limit=limit, paused=paused
        )

    def count_unpublished_outbox(self) -> int:
        """How many outbox rows wait to be published."""
        with self.database.connect() as conn:
            return outbox.count_unpublished(conn, self.tables)

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener(events)`` after every commit that appended events."""
        self.committed.listeners.append(listener)


def _default_files(database: Database) -> Callable[[Tables], Files]:
    """A bare Service's files (the ``App`` passes its settings'): a folder in the working
    directory, links signed with a key of this process, the default upload limit."""
    # Imported here: only a Service built without an App needs the defaults.
    from asanoha.platform.files import FileLinks, LocalStorage
    from asanoha.platform.files.storage import DEFAULT_FILE_DIR
    from asanoha.platform.settings import Settings

    defaults = Settings.model_fields
    return lambda tables: Files(
        database,
        tables,
        LocalStorage(DEFAULT_FILE_DIR),
        FileLinks(None, int(defaults["file_url_ttl"].default)),
        max_bytes=int(defaults["file_max_bytes"].default),
    )
