"""``Feature``: the unit an application is built from. Its decorators record frozen definitions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import Access, check_access
from asanoha.platform.model.agent import Agent
from asanoha.platform.model.aggregates import AggregateDef, define_aggregate
from asanoha.platform.model.backoff import Backoff
from asanoha.platform.model.concurrency import Concurrency, check_concurrency
from asanoha.platform.model.cron import check_cron
from asanoha.platform.model.crud import build_crud_handlers, check_exclusions
from asanoha.platform.model.entity import Entity
from asanoha.platform.model.feature_settings import (
    ConfigDef,
    SecretDef,
    check_toggle,
    declare_config,
    declare_secret,
)
from asanoha.platform.model.fields import EventPii, check_event_pii
from asanoha.platform.model.handlers import (
    CONSUMER_BACKOFF,
    ConsumerDef,
    ConsumerStart,
    CrudVerb,
    EntityDef,
    EventDef,
    HandlerDef,
    HandlerKind,
    JobDef,
    Lane,
    PostSaveHook,
    PreSaveHook,
    StreamHandlerDef,
    check_priority,
    payload_model_of,
)
from asanoha.platform.model.hooks import Hook, HookKind, check_hook
from asanoha.platform.model.names import check_segment, make_qn, to_kebab
from asanoha.platform.model.projections import ProjectionDef, ProjectionMode, define_projection
from asanoha.platform.model.rate_limit import RateLimit, check_rate_limit_declaration
from asanoha.platform.model.retention import parse_age
from asanoha.platform.model.sync_callables import check_not_async
from asanoha.platform.model.versions import PayloadUpcaster
from asanoha.platform.model.workflows import WorkflowDef, declare_workflow

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")
ENTITY_VERBS = ("created", "updated", "deleted", "restored", "forgotten")


class Feature:
    """A named set of entities, handlers, events, jobs and consumers."""

    def __init__(
        self,
        name: str,
        *,
        toggleable: bool = False,
        default_on: bool = True,
        system_scope: str | None = None,
    ) -> None:
        self.name = check_segment(name, "feature name")
        #: Why the feature acts for the whole system (``None``: it acts for one tenant): it
        #: alone writes shared rows (``Entity(shared=True)``) and may read another tenant's
        #: rows (``ctx.entity(name, tenant=...)``, audited).
        if system_scope is not None and (
            not isinstance(system_scope, str) or not system_scope.strip()
        ):
            raise DefinitionError(
                f"feature {self.name!r}: system_scope= takes the reason it acts for the whole "
                f"system, not {system_scope!r}"
            )
        self.system_scope = system_scope
        #: ``toggleable``: a tenant's feature can be switched off (``asanoha features
        #: disable``); ``default_on``: whether it is on in a tenant that never switched it.
        self.toggleable, self.default_on = check_toggle(self.name, toggleable, default_on)
        #: ``feature.config(...)`` keys and ``feature.secret(...)`` names.
        self.configs: dict[str, ConfigDef] = {}
        self.secrets: dict[str, SecretDef] = {}
        self.entities: dict[str, EntityDef] = {}
        self.handlers: list[HandlerDef] = []
        self.events: list[EventDef] = []
        self.jobs: list[JobDef] = []
        self.consumers: list[ConsumerDef] = []
        self.streams: list[StreamHandlerDef] = []
        self.workflows: list[WorkflowDef] = []
        self.aggregates: dict[str, AggregateDef] = {}
        self.projections: list[ProjectionDef] = []
        self.pre_save_hooks: dict[str, list[PreSaveHook]] = {}
        self.post_save_hooks: dict[str, list[PostSaveHook]] = {}
        #: validate, pre_delete, post_delete and after_commit hooks: kind -> entity -> hooks.
        self.entity_hooks: dict[HookKind, dict[str, list[Hook]]] = {}
        #: Set once a ``Registry`` has read the feature: later declarations would never run.
        self._read_by_registry = False

    def __repr__(self) -> str:
        return f"Feature({self.name!r})"

    def freeze(self) -> None:
        """Refuse further declarations: a registry (an ``App``) has read this feature and
        would never see them."""
        self._read_by_registry = True

    def _check_open(self, declaration: str) -> None:
        if self._read_by_registry:
            raise DefinitionError(
                f"feature {self.name!r}: {declaration} is declared after an App (a Registry) "
                "was built from the feature, which would never run it; declare everything "
                "before building the App (move 'app = App(...)' below the declarations)"
            )

    # -- configuration and secrets ----------------------------------------------------------

    def config(
        self,
        key: str,
        *,
        default: Any = None,
        per_tenant: bool = True,
        type: Any = None,
        description: str | None = None,
    ) -> ConfigDef:
        """Declare a configuration key: ``ctx.config[key]`` reads the tenant's value, else
        ``default``. ``type``: what values are (``str``, ``int``, a pydantic model, ...;
        default: the default's type). ``per_tenant=False``: one value for every tenant."""
        self._check_open(f"config {key!r}")
        made = declare_config(
            self.name,
            self.configs,
            key,
            default,
            per_tenant=per_tenant,
            type_=type,
            description=description,
        )
        self.configs[key] = made
        return made

    def secret(self, name: str, *, description: str | None = None) -> SecretDef:
        """Declare a secret: set write-only per tenant (``secrets:write:set``), stored
        sealed, read by this feature's handlers and jobs as ``ctx.secrets[name]``."""
        self._check_open(f"secret {name!r}")
        made = declare_secret(self.name, self.secrets, name, description)
        self.secrets[name] = made
        return made

    # -- entities ---------------------------------------------------------------------------

    def entity(
        self,
        name: str,
        entity: Entity,
        *,
        exclude_fields: Mapping[str, Iterable[str]] | None = None,
    ) -> EntityDef:
        """Register ``entity`` under ``name`` (and its standard events) without handlers."""
        kebab = check_segment(to_kebab(name), f"entity name in feature {self.name!r}")
        self._check_open(f"entity {kebab!r}")
        if kebab in self.entities:
            raise DefinitionError(f"feature {self.name!r} registers entity {kebab!r} twice")
        entity_def = EntityDef(
            feature=self.name,
            name=kebab,
            entity=entity,
            exclude_fields=check_exclusions(kebab, entity, exclude_fields),
        )
        self.entities[kebab] = entity_def
        for verb in ENTITY_VERBS:
            self.events.append(
                EventDef(
                    qn=entity_def.event_qn(verb),
                    feature=self.name,
                    model=None,
                    schema_version=entity.version,
                    upcasters=entity.event_upcasters(verb),
                    retired_keys=entity.retired_event_keys(verb),
                )
            )
        return entity_def

    def crud(
        self,
        name: str,
        entity: Entity,
        *,
        write: Access | None = None,
        read: Access | None = None,
        verbs: Iterable[CrudVerb] | None = None,
        exclude_fields: Mapping[str, Iterable[str]] | None = None,
        agent: Mapping[str, Agent] | None = None,
        descriptions: Mapping[str, str] | None = None,
        rate_limit: RateLimit | Mapping[str, RateLimit] | None = None,
        reason: str | None = None,
        replica: bool = False,
    ) -> EntityDef:
        """Register ``entity`` with its standard create/update/delete/restore/list/detail.

        ``rate_limit``: one ``RateLimit`` for every standard handler, or one per verb
        (``{"list": RateLimit(...)}``); ``reason``: why the others have none (needed when
        ``write`` or ``read`` admits anonymous callers). ``replica=True``: list and detail
        are declared ``replica=True`` (see ``query_handler``)."""
        if not isinstance(replica, bool):
            raise DefinitionError(f"crud {name!r}: replica= takes True or False, not {replica!r}")
        entity_def = self.entity(name, entity, exclude_fields=exclude_fields)
        self.handlers.extend(
            build_crud_handlers(
                entity_def,
                write=write,
                read=read,
                verbs=verbs,
                agent=agent,
                descriptions=descriptions,
                rate_limit=rate_limit,
                rate_limit_reason=reason,
                replica=replica,
            )
        )
        return entity_def

    def pre_save(self, entity_name: str) -> Callable[[PreSaveHook], PreSaveHook]:
        """Decorate ``hook(changes, previous, is_new) -> changes``, run before every save."""

        self._check_open(f"a pre_save hook of {entity_name!r}")

        def register(hook: PreSaveHook) -> PreSaveHook:
            self._check_open(f"a pre_save hook of {entity_name!r}")
            check_hook("pre_save", hook, f"feature {self.name!r}, entity {entity_name!r}")
            self.pre_save_hooks.setdefault(to_kebab(entity_name), []).append(hook)
            return hook

        return register

    def post_save(self, entity_name: str) -> Callable[[PostSaveHook], PostSaveHook]:
        """Decorate ``hook(row, ctx)``, run after every save inside the write transaction."""

        self._check_open(f"a post_save hook of {entity_name!r}")

        def register(hook: PostSaveHook) -> PostSaveHook:
            self._check_open(f"a post_save hook of {entity_name!r}")
            check_hook("post_save", hook, f"feature {self.name!r}, entity {entity_name!r}")
            self.post_save_hooks.setdefault(to_kebab(entity_name), []).append(hook)
            return hook

        return register

    def validate(self, entity_name: str) -> Callable[[F], F]:
        """Decorate ``hook(data, previous, is_new) -> None``, run before every create and
        update after defaults and pre-save hooks and before any gate; it raises
        ``ValidationError(fields=[{"path", "type", "message"}])`` to refuse the write (400)."""
        return self._entity_hook("validate", entity_name)

    def pre_delete(self, entity_name: str) -> Callable[[F], F]:
        """Decorate ``hook(row, ctx)``, run before every delete inside the write
        transaction; raising refuses the delete."""
        return self._entity_hook("pre_delete", entity_name)

    def post_delete(self, entity_name: str) -> Callable[[F], F]:
        """Decorate ``hook(row, ctx)``, run after every delete inside the write transaction."""
        return self._entity_hook("post_delete", entity_name)

    def after_commit(self, entity_name: str) -> Callable[[F], F]:
        """Decorate ``hook(event)``, run once the write's transaction has committed, with
        each stored event of the entity it appended. Never inside the transaction: an
        exception is logged and counted, never answered to the caller, and not retried;
        durable follow-up work belongs in a job (``feature.job(on=...)``)."""
        return self._entity_hook("after_commit", entity_name)

    def _entity_hook(self, kind: HookKind, entity_name: str) -> Callable[[F], F]:
        self._check_open(f"a {kind} hook of {entity_name!r}")

        def register(hook: F) -> F:
            self._check_open(f"a {kind} hook of {entity_name!r}")
            check_hook(kind, hook, f"feature {self.name!r}, entity {entity_name!r}")
            by_entity = self.entity_hooks.setdefault(kind, {})
            by_entity.setdefault(to_kebab(entity_name), []).append(hook)
            return hook

        return register

    # -- handlers ---------------------------------------------------------------------------

    def write_handler(
        self,
        name: str,
        *,
        access: Access | None = None,
        agent: Agent | None = None,
        description: str | None = None,
        schema: type[BaseModel] | None = None,
        identity_switch: str | None = None,
        system_identity: str | None = None,
        raw_sql: str | None = None,
        skip_transition_guard: str | None = None,
        rate_limit: RateLimit | None = None,
        reason: str | None = None,
        personal: Collection[str] = (),
        answer_once: str | None = None,
    ) -> Callable[[F], F]:
        """Register ``func(payload, ctx: WriteContext)`` as ``<feature>:write:<name>``.

        ``ctx.write_as`` may act only as the caller's tenant with a subset of the caller's
        roles; ``identity_switch="<reason>"`` lifts that, ``system_identity="<reason>"`` lets
        it act as the tenant's system user. ``raw_sql="<reason>"`` gives it ``ctx.sql``: SQL
        on its own tables in the write's transaction (never on entity or platform tables).
        ``skip_transition_guard="<reason>"``: its entity writes may move a field outside the
        entity's declared ``transitions`` (a repair, an import). ``rate_limit=RateLimit(...)``:
        how often one caller may call it (429 ``rate_limited`` beyond); a handler that admits
        anonymous callers must declare one, or ``rate_limit=None, reason="<why none>"``.
        ``personal=["email", ...]``: payload fields that carry personal values, shown as
        ``[personal]`` in the stored summary of an approval of the call.
        ``answer_once="<reason>"``: its answer carries a secret shown once (a new token), so
        it is never kept for idempotent replays: a call with an idempotency key answers 400
        ``idempotency_key_not_kept``.
        """
        qn = make_qn(self.name, "write", name)
        return self._handler(
            "write",
            name,
            access,
            agent,
            description,
            schema,
            identity_switch=_reason_or_none(identity_switch, qn, "identity_switch"),
            system_identity=_reason_or_none(system_identity, qn, "system_identity"),
            raw_sql=_raw_sql(raw_sql, qn),
            skip_transition_guard=_skip_transition_guard(skip_transition_guard, qn),
            rate_limit=_rate_limit(rate_limit, qn),
            rate_limit_reason=reason,
            personal_payload=_personal_payload(personal, qn),
            answer_once=_reason_or_none(answer_once, qn, "answer_once"),
        )

    def query_handler(
        self,
        name: str,
        *,
        access: Access | None = None,
        agent: Agent | None = None,
        description: str | None = None,
        schema: type[BaseModel] | None = None,
        raw_sql: str | None = None,
        rate_limit: RateLimit | None = None,
        reason: str | None = None,
        replica: bool = False,
    ) -> Callable[[F], F]:
        """Register ``func(payload, ctx: QueryContext)`` as ``<feature>:query:<name>``.

        ``raw_sql="<reason>"`` gives it ``ctx.sql``: reads of its own tables.
        ``rate_limit=RateLimit(...)``: how often one caller may call it; a handler that admits
        anonymous callers must declare one, or ``rate_limit=None, reason="<why none>"``.
        ``replica=True``: HTTP calls may read the read replica (``ASANOHA_READ_DATABASE_URL``)
        when it has replayed the caller's last write and lags at most
        ``ASANOHA_REPLICA_MAX_LAG``."""
        qn = make_qn(self.name, "query", name)
        if not isinstance(replica, bool):
            raise DefinitionError(f"{qn}: replica= takes True or False, not {replica!r}")
        return self._handler(
            "query",
            name,
            access,
            agent,
            description,
            schema,
            raw_sql=_raw_sql(raw_sql, qn),
            rate_limit=_rate_limit(rate_limit, qn),
            rate_limit_reason=reason,
            replica=replica,
        )

    def _handler(
        self,
        kind: HandlerKind,
        name: str,
        access: Access | None,
        agent: Agent | None,
        description: str | None,
        schema: type[BaseModel] | None,
        *,
        identity_switch: str | None = None,
        system_identity: str | None = None,
        raw_sql: str | None = None,
        skip_transition_guard: str | None = None,
        rate_limit: RateLimit | None = None,
        rate_limit_reason: str | None = None,
        replica: bool = False,
        personal_payload: frozenset[str] = frozenset(),
        answer_once: str | None = None,
    ) -> Callable[[F], F]:
        qn = make_qn(self.name, kind, name)
        self._check_open(f"handler {qn!r}")
        checked = check_access(access, qn)
        # At the decorator's call, as the other options are checked.
        check_rate_limit_declaration(qn, checked, rate_limit, rate_limit_reason)

        def register(func: F) -> F:
            self._check_open(f"handler {qn!r}")
            check_not_async(func, qn, "handler", f"a {kind} handler runs inside its transaction")
            self.handlers.append(
                HandlerDef(
                    qn=qn,
                    kind=kind,
                    feature=self.name,
                    func=func,
                    payload_model=payload_model_of(func, schema, qn),
                    access=checked,
                    agent=agent,
                    description=description or _first_line(func.__doc__),
                    identity_switch=identity_switch,
                    system_identity=system_identity,
                    raw_sql=raw_sql,
                    skip_transition_guard=skip_transition_guard,
                    rate_limit=rate_limit,
                    rate_limit_reason=rate_limit_reason,
                    replica=replica,
                    personal_payload=personal_payload,
                    answer_once=answer_once,
                )
            )
            return func

        return register

    # -- events, jobs, consumers ------------------------------------------------------------

    def event(
        self,
        name: str,
        model: type[BaseModel] | None = None,
        pii: EventPii = "none",
        *,
        version: int = 1,
        upcasters: Mapping[int, PayloadUpcaster] | None = None,
        keep_for: str | dt.timedelta | None = None,
    ) -> EventDef:
        """Declare a domain event ``<feature>:event:<name>`` with its payload model.

        ``pii={"email": "self", ...}``: its personal fields and their subject, encrypted like
        an entity's. ``version=N``: new events are stored as version N; ``upcasters={1: up_1_2, ...}``
        bring stored payloads of older versions to it on every read. ``keep_for="365d"``
        (``d``, ``h``, ``m``): ``asanoha events prune`` deletes events of this type once older.
        """
        qn = make_qn(self.name, "event", name)
        kept: dt.timedelta | None = None
        if keep_for is not None:
            try:
                kept = parse_age(keep_for)
            except ValueError as exc:
                raise DefinitionError(f"event {qn!r}: keep_for {exc}") from None
        self._check_open(f"event {qn!r}")
        event_def = EventDef(
            qn=qn,
            feature=self.name,
            model=model,
            pii=check_event_pii(qn, model, pii),
            schema_version=version,
            upcasters=dict(upcasters or {}),
            keep_for=kept,
        )
        self.events.append(event_def)
        return event_def

    def job(
        self,
        name: str,
        *,
        on: str | None = None,
        cron: str | None = None,
        manual: bool = False,
        retries: int = 0,
        backoff: Backoff | None = None,
        lane: Lane = "worker",
        timeout: float | None = None,
        description: str | None = None,
        retry_on: Iterable[type[BaseException]] | None = None,
        no_retry_on: Iterable[type[BaseException]] = (),
        acts_for_system: str | None = None,
        schema: type[BaseModel] | None = None,
        priority: int | None = None,
        concurrency: Concurrency | None = None,
        max_per_tenant: int | None = None,
        unique_for: float | None = None,
        per_tenant: bool = False,
        catch_up: bool = False,
        run_on_boot: bool = False,
        rate_limit: RateLimit | None = None,
        keep_result: bool = False,
    ) -> Callable[[F], F]:
        """Register ``func(payload: dict, ctx: JobContext)`` as the job ``<feature>:job:<name>``.

        ``retry_on`` limits retries to those exceptions; ``no_retry_on`` fails the job at once
        on those. Without either, any exception is retried except a 4xx ``AsanohaError``
        (validation, access, not found), which would fail the same way again.
        ``acts_for_system="<reason>"``: the job's gated operations are not limited by the
        risk of the agent call that began its chain. ``schema=Model`` (with ``manual=True``)
        validates the payload of every manual enqueue (``ctx.dispatch``, ``enqueue_job``,
        ``asanoha jobs run``, ``job-admin:write:run``); the job receives the validated
        payload as a dict. ``priority=0..9``: among the messages waiting in its lane's queue,
        higher priorities are delivered first (the jobs guide, *Priorities*, says what each
        broker keeps).
        ``concurrency=Concurrency.skip/replace/sequential/debounce(...)``: how copies of the
        job with the same key run beside each other (default: in parallel);
        ``max_per_tenant=N``: at most N attempts run at once per tenant; ``unique_for=s``: an
        enqueue of a key with a pending, running or succeeded row of the last ``s`` seconds
        returns that row's id. ``per_tenant=True`` (with ``cron=``): each tick runs the job
        once per tenant of ``App(tenants=...)``; ``catch_up=True``: a beat that was down
        sends the ticks it missed (else they are not replayed); ``run_on_boot=True``: the
        job runs once per deployed release (``ASANOHA_RELEASE``) when workers start.
        ``rate_limit=RateLimit("10/minute", per="tenant")``: an attempt over the limit waits
        until the window has room (its attempt not spent), it does not fail.
        ``keep_result=True``: the job's return value (JSON, at most 1 MB) is stored sealed
        when an attempt succeeds, for ``app.jobs.result(job_id, timeout=)``.
        """
        qn = make_qn(self.name, "job", name)
        self._check_open(f"job {qn!r}")
        system_reason = _acts_for_system(acts_for_system, qn)
        if on is None and cron is None and not manual and not run_on_boot:
            raise DefinitionError(
                f"{qn} has no trigger; pass on=..., cron=..., manual=True or run_on_boot=True"
            )
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise DefinitionError(f"{qn}: rate_limit= takes RateLimit('10/minute', per=...)")
        if (per_tenant or catch_up) and cron is None:
            option = "per_tenant=True" if per_tenant else "catch_up=True"
            raise DefinitionError(f"{qn}: {option} applies to cron ticks; pass cron=... or drop it")
        if schema is not None and not manual:
            raise DefinitionError(
                f"{qn}: schema= validates the payload of manual runs; declare manual=True "
                "or drop schema="
            )
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise DefinitionError(f"{qn}: schema= must be a pydantic model class, not {schema!r}")
        check_priority(priority, qn)
        if cron is not None:
            check_cron(cron, qn)
        mode = check_concurrency(
            concurrency,
            max_per_tenant,
            unique_for,
            qn=qn,
            cron=cron,
            schema_fields=None if schema is None else tuple(schema.model_fields),
        )
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise DefinitionError(
                f"{qn}: retries must be a whole number >= 0 (0: no retry), not {retries!r}"
            )
        retry_types = None if retry_on is None else _exception_types(retry_on, qn, "retry_on")
        no_retry_types = _exception_types(no_retry_on, qn, "no_retry_on")
        if lane not in ("worker", "api"):
            raise DefinitionError(f"{qn}: lane must be 'worker' or 'api', not {lane!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise DefinitionError(f"{qn}: timeout must be a positive number of seconds")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise DefinitionError(
                f"{qn}: backoff must be Backoff.fixed(...) or Backoff.exponential(...)"
            )

        def register(func: F) -> F:
            check_not_async(
                func,
                qn,
                "job",
                "jobs run in Celery worker threads and processes, not an event loop",
            )
            self._check_open(f"job {qn!r}")
            self.jobs.append(
                JobDef(
                    qn=qn,
                    feature=self.name,
                    func=func,
                    on=on,
                    cron=cron,
                    manual=manual,
                    retries=retries,
                    backoff=backoff or Backoff.exponential(),
                    lane=lane,
                    timeout=timeout,
                    description=description or _first_line(func.__doc__),
                    retry_on=retry_types,
                    no_retry_on=no_retry_types,
                    acts_for_system=system_reason,
                    schema=schema,
                    priority=priority,
                    concurrency=mode,
                    max_per_tenant=max_per_tenant,
                    unique_for=None if unique_for is None else float(unique_for),
                    per_tenant=bool(per_tenant),
                    catch_up=bool(catch_up),
                    run_on_boot=bool(run_on_boot),
                    rate_limit=rate_limit,
                    keep_result=bool(keep_result),
                )
            )
            return func

        return register

    def stream_handler(
        self,
        name: str,
        *,
        access: Access | None = None,
        on: Iterable[str],
        description: str | None = None,
    ) -> Callable[[F], F]:
        """Register ``func(event: dict, ctx: StreamContext)`` as ``<feature>:stream:<name>``,
        served at ``/api/stream/<qn>``: a live feed of what ``func`` makes of each event of
        the types ``on`` (patterns such as ``crm:event:ticket.*``) the caller may see, with
        the access checks of ``/api/stream``; ``access`` decides who may open it. Returning
        ``None`` sends nothing for that event. Resumable like ``/api/stream`` (the message id
        is the event's position)."""
        qn = make_qn(self.name, "stream", name)
        self._check_open(f"stream handler {qn!r}")
        checked = check_access(access, qn)
        patterns = tuple(on) if not isinstance(on, str) else (on,)
        if not patterns or not all(isinstance(p, str) and p.strip() for p in patterns):
            raise DefinitionError(f"{qn}: on=[...] must name at least one event-type pattern")

        def register(func: F) -> F:
            check_not_async(func, qn, "stream handler", "it runs once per event and client")
            self._check_open(f"stream handler {qn!r}")
            self.streams.append(
                StreamHandlerDef(
                    qn=qn,
                    feature=self.name,
                    func=func,
                    access=checked,
                    on=patterns,
                    description=description or func.__doc__,
                )
            )
            return func

        return register

    def workflow(
        self,
        name: str,
        *,
        on: str | None = None,
        manual: bool = False,
        cron: str | None = None,
        per_tenant: bool = False,
    ) -> WorkflowDef:
        """Declare the workflow ``<feature>:workflow:<name>``: steps declared with
        ``.step(...)`` (each a job ``<feature>:workflow:<name>:<step>``), ``.sleep(...)``,
        ``.wait(...)`` and ``.approval(...)``. ``on=<write handler QN>`` starts a run in the
        triggering write's transaction, on its payload; ``manual=True``: started by
        ``app.workflows.start``; ``cron="..."``: each tick starts a run on an empty payload
        through the job ``<workflow qn>:cron`` (``per_tenant=True``: one per tenant of
        ``App(tenants=...)``), which job control pauses, and Flower and the console show,
        like any cron job."""
        declared = declare_workflow(self, name, on, manual, cron, per_tenant)
        if any(other.qn == declared.qn for other in self.workflows):
            raise DefinitionError(f"workflow {declared.qn!r} is declared twice")
        self.workflows.append(declared)
        return declared

    def aggregate(
        self, name: str, *, snapshot_every: int | None = None, version: int | str | None = None
    ) -> Callable[[A], A]:
        """Declare the aggregate ``<feature>:<name>``: a class with ``apply_<event>`` methods
        (or ``apply(event)``), or a ``fold(state, event) -> state`` function, whose state
        ``ctx.load(name, stream_id)`` folds from the stream's events (see
        ``model/aggregates.py``). ``snapshot_every=N`` keeps a snapshot after each N events;
        ``version=``: the state's shape (default: a digest of the code), a snapshot of
        another one is taken again."""
        kebab = check_segment(to_kebab(name), f"aggregate name in feature {self.name!r}")
        self._check_open(f"aggregate {kebab!r}")
        if kebab in self.aggregates:
            raise DefinitionError(f"feature {self.name!r} declares aggregate {kebab!r} twice")

        def register(target: A) -> A:
            self._check_open(f"aggregate {kebab!r}")
            self.aggregates[kebab] = define_aggregate(
                self.name, kebab, target, snapshot_every=snapshot_every, version=version
            )
            return target

        return register

    def projection(
        self,
        name: str,
        *,
        table: Any,
        on: Iterable[str],
        mode: ProjectionMode = "inline",
        partitions: int = 1,
    ) -> Callable[[F], F]:
        """Declare ``<feature>:projection:<name>``: ``func(event, target)`` keeps ``table``
        (a sqlalchemy ``Table`` of the application's own) from the events of the types
        ``on``, in the transaction of each write that appends one (``mode="async"``: by the
        consumer ``<feature>:consumer:projection-<name>`` with ``partitions`` cursors, after
        the write), and ``asanoha projections rebuild`` replays them into a shadow table and
        swaps it in (see ``model/projections.py``)."""
        types = tuple(on)

        def register(func: F) -> F:
            declared = define_projection(self.name, name, table, types, func, mode, partitions)
            self._check_open(f"projection {declared.qn!r}")
            self.projections.append(declared)
            return func

        return register

    def consumer(
        self,
        name: str,
        *,
        on: Iterable[str],
        delivery: Literal["shared"] = "shared",
        max_attempts: int = 5,
        start: ConsumerStart = "beginning",
        acts_for_system: str | None = None,
        backoff: Backoff | None = None,
        raw_sql: str | None = None,
        partitions: int = 1,
    ) -> Callable[[F], F]:
        """Register ``func(event: StoredEvent, ctx: ConsumerContext)`` as
        ``<feature>:consumer:<name>``: called once per committed event of the types ``on``
        (domain or entity event QNs), in order; a failing event is tried again after
        ``backoff`` (default ``Backoff.exponential(base=2.0, max=300.0)``), and after
        ``max_attempts`` failures at one event the consumer is dead there until restarted or
        told to skip it. ``start="now"`` makes a new consumer begin at the newest event
        instead of the first.
        ``acts_for_system="<reason>"``: the consumer's gated operations are not limited by
        the risk of the agent call that began the event's chain.
        ``raw_sql="<reason>"`` gives it ``ctx.sql``: SQL on its own tables in the delivery's
        savepoint.
        ``partitions=N`` gives it N cursors: an event goes to partition
        ``partition_key(tenant, stream_id) % N``, so each stream stays in order while
        different streams are delivered in parallel by different workers."""
        qn = make_qn(self.name, "consumer", name)
        self._check_open(f"consumer {qn!r}")
        system_reason = _acts_for_system(acts_for_system, qn)
        sql_reason = _raw_sql(raw_sql, qn)
        event_types = tuple(on)
        if not event_types:
            raise DefinitionError(f"{qn}: on=[...] must name at least one event type")
        if delivery != "shared":
            raise DefinitionError(f"{qn}: only delivery='shared' is supported")
        if max_attempts < 1:
            raise DefinitionError(f"{qn}: max_attempts must be >= 1")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise DefinitionError(f"{qn}: partitions must be an int >= 1, not {partitions!r}")
        if start not in ("beginning", "now"):
            raise DefinitionError(f"{qn}: start must be 'beginning' or 'now', not {start!r}")
        if len(set(event_types)) != len(event_types):
            raise DefinitionError(f"{qn}: on= names an event type twice")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise DefinitionError(
                f"{qn}: backoff must be Backoff.fixed(...) or Backoff.exponential(...)"
            )

        def register(func: F) -> F:
            check_not_async(
                func, qn, "consumer", "consumers run inside the pass's database transaction"
            )
            self._check_open(f"consumer {qn!r}")
            self.consumers.append(
                ConsumerDef(
                    qn=qn,
                    feature=self.name,
                    func=func,
                    on=event_types,
                    delivery=delivery,
                    max_attempts=max_attempts,
                    start=start,
                    acts_for_system=system_reason,
                    backoff=backoff or CONSUMER_BACKOFF,
                    raw_sql=sql_reason,
                    partitions=partitions,
                )
            )
            return func

        return register


def _exception_types(
    types: Iterable[type[BaseException]], qn: str, option: str
) -> tuple[type[BaseException], ...]:
    # A single class is accepted as well as a tuple of them, as in ``except``.
    found: tuple[Any, ...] = (types,) if isinstance(types, type) else tuple(types)
    for kind in found:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise DefinitionError(f"{qn}: {option}= takes exception classes, not {kind!r}")
    return tuple(found)


def _first_line(doc: str | None) -> str | None:
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


def _acts_for_system(reason: str | None, qn: str) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str) or not reason.strip():
        raise DefinitionError(
            f"{qn}: acts_for_system= needs a non-blank reason: why it acts for the system and "
            "not for the agent whose call began its chain (or leave it out)"
        )
    return reason


def _reason_or_none(reason: str | None, qn: str, option: str) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str) or not reason.strip():
        raise DefinitionError(f"{qn}: {option}= needs a non-blank reason (why it may switch)")
    return reason


def _rate_limit(limit: RateLimit | None, qn: str) -> RateLimit | None:
    if limit is not None and not isinstance(limit, RateLimit):
        raise DefinitionError(f"{qn}: rate_limit= takes RateLimit('20/minute', per=...)")
    return limit


def _personal_payload(names: Collection[str], qn: str) -> frozenset[str]:
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise DefinitionError(f"{qn}: personal= takes a list of payload field names")
    return frozenset(names)


def _skip_transition_guard(reason: str | None, qn: str) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str) or not reason.strip():
        raise DefinitionError(
            f"{qn}: skip_transition_guard= needs a non-blank reason: why its writes may move "
            "a field outside the entity's transitions (or leave it out)"
        )
    return reason


def _raw_sql(reason: str | None, qn: str) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str) or not reason.strip():
        raise DefinitionError(
            f"{qn}: raw_sql= needs a non-blank reason: why it runs SQL of its own rather than "
            "going through ctx.entity(...) (or leave it out)"
        )
    return reason
