"""Frozen definitions of handlers, events, jobs, consumers and entity bindings."""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.access import Access
from asanoha.platform.model.agent import Agent
from asanoha.platform.model.agent_hints import check_declared_hints
from asanoha.platform.model.backoff import Backoff
from asanoha.platform.model.concurrency import Concurrency
from asanoha.platform.model.entity import Entity
from asanoha.platform.model.fields import EventPii
from asanoha.platform.model.rate_limit import RateLimit, check_rate_limit_declaration
from asanoha.platform.model.versions import PayloadUpcaster, check_versions

HandlerKind = Literal["write", "query"]
CrudVerb = Literal["create", "update", "delete", "restore", "list", "detail"]
Lane = Literal["worker", "api"]
ConsumerStart = Literal["beginning", "now"]
#: Waits between a consumer's attempts at a failing event: 2, 4, 8, 16 s, so the default five
#: attempts ride out a downstream outage of about half a minute before the consumer is dead.
CONSUMER_BACKOFF = Backoff.exponential(base=2.0, max=300.0)
HandlerFunc = Callable[[Any, Any], Any]
#: ``hook(changes, previous_row_or_None, is_new) -> changes``
PreSaveHook = Callable[[dict[str, Any], dict[str, Any] | None, bool], dict[str, Any]]
#: ``hook(row, ctx)``, inside the write transaction
PostSaveHook = Callable[[dict[str, Any], Any], None]


@dataclass(frozen=True)
class EntityDef:
    """An entity registered under a name in a feature."""

    feature: str
    name: str
    entity: Entity
    exclude_fields: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @functools.cached_property
    def key(self) -> str:
        """``feature:name``: how the registry and streams refer to this entity."""
        # Kept: every write asks a dozen times, and the definition is frozen.
        return f"{self.feature}:{self.name}"

    def event_qn(self, verb: str) -> str:
        """The event type of a standard verb, ``feature:event:<entity>.<verb>``."""
        return f"{self.feature}:event:{self.name}.{verb}"


@dataclass(frozen=True)
class CrudBinding:
    """Marks a standard handler: which entity and verb it serves."""

    entity: str
    verb: CrudVerb


@dataclass(frozen=True)
class HandlerDef:
    """A write or query handler: ``func(payload, ctx)``."""

    qn: str
    kind: HandlerKind
    feature: str
    func: HandlerFunc
    payload_model: type[BaseModel]
    access: Access
    agent: Agent | None = None
    description: str | None = None
    crud: CrudBinding | None = None
    #: Why ``ctx.write_as`` may act as any user (another tenant, other roles); ``None``: only
    #: as the caller's tenant with a subset of the caller's roles.
    identity_switch: str | None = None
    #: Why ``ctx.write_as`` may act as the tenant's system user.
    system_identity: str | None = None
    #: Why the handler runs SQL of its own (``ctx.sql``, on its own tables only); ``None``:
    #: it has no SQL access.
    raw_sql: str | None = None
    #: Why the handler's entity writes may move a field outside its declared transitions;
    #: ``None``: every move is checked.
    skip_transition_guard: str | None = None
    #: How often one caller may call the handler; ``None``: no limit of its own (the
    #: application's default, ``ASANOHA_RATE_LIMIT_DEFAULT``, applies).
    rate_limit: RateLimit | None = None
    #: Why the handler has no rate limit (``rate_limit=None, reason=...``): then the
    #: application's default does not apply either.
    rate_limit_reason: str | None = None
    #: A query that may read the read replica (``ASANOHA_READ_DATABASE_URL``) when called
    #: over HTTP; every other read stays on the primary.
    replica: bool = False
    #: The payload fields of a custom write handler that carry personal values: the stored
    #: summary of an approval of its call shows ``[personal]`` for them.
    personal_payload: frozenset[str] = frozenset()
    #: Why the handler's answer must never be kept (it carries a credential shown once):
    #: a call with an idempotency key is refused rather than stored for its replays.
    answer_once: str | None = None

    def __post_init__(self) -> None:
        # Every way of defining a handler (decorator, crud) ends here: one place refuses
        # agent hints that contradict what the handler does, and a public handler that
        # says nothing about its rate limit.
        check_declared_hints(self)
        check_rate_limit_declaration(self.qn, self.access, self.rate_limit, self.rate_limit_reason)
        check_personal_payload(self.qn, self.payload_model, self.personal_payload)


@dataclass(frozen=True)
class EventDef:
    """A domain event type and the model of its payload (``None``: any JSON object)."""

    qn: str
    feature: str
    model: type[BaseModel] | None
    #: ``"none"``, or its personal fields and their stance (see ``fields.check_event_pii``).
    pii: EventPii = "none"
    #: The version new events are written with (``StoredEvent.schema_version``).
    schema_version: int = 1
    #: The version each upcaster reads -> ``up(payload)``, the payload of the next version.
    upcasters: Mapping[int, PayloadUpcaster] = field(default_factory=dict)
    #: Top-level payload keys that older releases of the platform wrote and no reader gets
    #: (dropped on read, whatever the event's version).
    retired_keys: frozenset[str] = frozenset()
    #: How long events of this type are kept (``asanoha events prune`` without
    #: ``--older-than`` prunes older ones); ``None``: for ever.
    keep_for: dt.timedelta | None = None

    def __post_init__(self) -> None:
        check_versions(f"event {self.qn!r}", self.schema_version, self.upcasters)


@dataclass(frozen=True)
class JobDef:
    """A background job: ``func(payload: dict, ctx: JobContext)``, run as a Celery task."""

    qn: str
    feature: str
    func: Callable[[dict[str, Any], Any], Any]
    on: str | None = None
    cron: str | None = None
    manual: bool = False
    retries: int = 0
    backoff: Backoff = field(default_factory=lambda: Backoff.exponential())
    lane: Lane = "worker"
    #: Seconds an attempt may run; ``None``: the platform's default (``ASANOHA_JOB_TIMEOUT``).
    timeout: float | None = None
    description: str | None = None
    #: Only these exceptions are retried (``None``: any, except a 4xx ``AsanohaError``).
    retry_on: tuple[type[BaseException], ...] | None = None
    #: These exceptions fail the job at once, retries left or not.
    no_retry_on: tuple[type[BaseException], ...] = ()
    #: Why the job acts for the system, not for the principal whose chain triggered it: a
    #: chain an agent began below ``high`` then does not limit its gated operations.
    acts_for_system: str | None = None
    #: The payload model of manual runs (``manual=True``): every manual enqueue validates
    #: its payload against it and stores the validated payload.
    schema: type[BaseModel] | None = None
    #: 0 (the default when any job declares one) .. 9 (runs first): the broker delivers
    #: a queue's waiting messages of higher priority first.
    priority: int | None = None
    #: How copies of the job run beside each other (``parallel``: no rule).
    concurrency: Concurrency = field(default_factory=Concurrency.parallel)
    #: At most this many attempts run at once per tenant (``None``: no limit).
    max_per_tenant: int | None = None
    #: Seconds an enqueue of a key that has a pending, running or succeeded row returns that
    #: row instead of a new one (``None``: no such rule).
    unique_for: float | None = None
    #: A cron tick runs the job once per tenant of ``App(tenants=...)``.
    per_tenant: bool = False
    #: A beat that was down sends the ticks it missed (else only ticks on time run).
    catch_up: bool = False
    #: Enqueued once per deployed release when workers start.
    run_on_boot: bool = False
    #: How often its attempts may start, per tenant or triggering user; an attempt over
    #: the limit waits (not spent) until the window has room.
    rate_limit: RateLimit | None = None
    #: The workflow step this job runs (a ``workflows.StepDef``; ``None``: a plain job).
    workflow_step: Any = None
    #: Its return value is stored, sealed, when an attempt succeeds (``app.jobs.result``).
    keep_result: bool = False

    @property
    def triggers(self) -> str:
        """What starts it, as its declaration says: ``on <qn>``, ``cron <expression>``,
        ``run_on_boot``, ``manual``, ``step of <workflow qn>`` (comma-separated when
        several)."""
        declared = [
            f"on {self.on}" if self.on else "",
            f"cron {self.cron}" if self.cron else "",
            "run_on_boot" if self.run_on_boot else "",
            "manual" if self.manual else "",
            f"step of {self.workflow_step.workflow_qn}" if self.workflow_step else "",
        ]
        return ", ".join(trigger for trigger in declared if trigger)

    @property
    def keyed(self) -> bool:
        """Whether its rows carry a concurrency key (enqueues look for rows of the key)."""
        return self.concurrency.keyed or self.unique_for is not None

    @property
    def claim_limited(self) -> bool:
        """Whether a claim of its rows must first count the running attempts of a key."""
        return self.concurrency.mode == "sequential" or self.max_per_tenant is not None


@dataclass(frozen=True)
class ConsumerDef:
    """An event consumer: ``func(event: StoredEvent, ctx: ConsumerContext)``, called once per
    committed event of the types ``on``, in order, with a durable cursor."""

    qn: str
    feature: str
    func: Callable[[Any, Any], Any]
    on: tuple[str, ...]
    delivery: Literal["shared"] = "shared"
    max_attempts: int = 5
    #: Where a new cursor starts: the first event, or the newest one when it is registered.
    start: ConsumerStart = "beginning"
    #: Why the consumer acts for the system, not for the principal whose chain appended the
    #: event: a chain an agent began below ``high`` then does not limit its gated operations.
    acts_for_system: str | None = None
    #: The wait after failed attempt n at an event before attempt n + 1.
    backoff: Backoff = CONSUMER_BACKOFF
    #: Why the consumer runs SQL of its own (``ctx.sql``, on its own tables only).
    raw_sql: str | None = None
    #: Cursors a new consumer gets: an event goes to ``partition_key % partitions``, so each
    #: stream stays in order while different streams are delivered in parallel.
    partitions: int = 1
    #: Whether switching a toggleable feature off in a tenant parks the tenant's events
    #: (``False`` for a projection's keeper: a read model follows every event, so that it is
    #: current when the feature is switched on again).
    toggled: bool = True


@dataclass(frozen=True)
class StreamHandlerDef:
    """A custom live feed at ``/api/stream/<qn>``: ``func(event: dict, ctx)`` is called with
    each event of the types ``on`` that the caller may see (shaped as ``/api/stream`` shows
    it) and returns what the client gets for it (``None``: nothing)."""

    qn: str
    feature: str
    func: Callable[[Any, Any], Any]
    access: Access
    #: Event-type patterns (``crm:event:ticket.*``) the feed follows.
    on: tuple[str, ...]
    description: str | None = None


def payload_model_of(func: Callable[..., Any], schema: type[BaseModel] | None, qn: str) -> type:
    """The payload model: ``schema=`` or the annotation of the handler's first parameter."""
    if schema is not None:
        model: type = schema
    else:
        params = list(inspect.signature(func).parameters.values())
        if not params:
            raise DefinitionError(f"{qn}: a handler takes (payload, ctx)")
        try:
            hints = typing.get_type_hints(func)
        except NameError as exc:
            raise DefinitionError(f"{qn}: cannot resolve the payload annotation: {exc}") from exc
        model = hints.get(params[0].name, inspect.Parameter.empty)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise DefinitionError(
            f"{qn}: annotate the first parameter with a pydantic model, or pass schema=..."
        )
    return model


#: The job priorities: 0 (lowest, the default) to 9 (delivered first).
PRIORITIES = range(10)


def check_priority(priority: int | None, job_qn: str) -> None:
    """Refuse a priority outside 0..9 at definition time, naming the job."""
    if priority is None:
        return
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise DefinitionError(
            f"{job_qn}: priority must be a whole number from 0 (lowest) to 9 (runs first), "
            f"not {priority!r}"
        )


def check_personal_payload(qn: str, model: type[BaseModel], names: frozenset[str]) -> None:
    """Refuse ``personal=`` names that are not fields of the handler's payload model."""
    unknown = sorted(names - set(model.model_fields))
    if unknown:
        raise DefinitionError(
            f"{qn}: personal= names {', '.join(map(repr, unknown))}, not a field of its "
            f"payload {model.__name__} (fields: {', '.join(model.model_fields) or 'none'})"
        )
