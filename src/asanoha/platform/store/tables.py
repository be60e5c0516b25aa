"""SQLAlchemy Core tables: the event store, the outbox, job runs, consumers and entity rows."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from asanoha.platform.model import EntityDef, Registry, money
from asanoha.platform.model.fields import Field
from asanoha.platform.personal.blind_index import blind_column, blind_indexed_fields
from asanoha.platform.store.append_only import refuse_payload_updates
from asanoha.platform.store.search import search_index
from asanoha.platform.store.upcasting import NO_UPCASTERS, Upcasters, upcasters_for

# JSONB on Postgres, JSON text elsewhere. BigInteger identity on Postgres; SQLite only
# auto-increments an INTEGER PRIMARY KEY.
Json: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")
Position = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[dt.datetime]):
    """A timezone-aware timestamp; SQLite keeps no zone, so its values are read back as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value


Timestamp = UtcDateTime()

#: Decimal places of a ``decimal`` field (the column is numeric(38, 10) on Postgres).
DECIMAL_PLACES = 10
_DECIMAL_STEP = decimal.Decimal(1).scaleb(-DECIMAL_PLACES)
# 38 significant digits do not fit the default context (28).
_DECIMAL_CONTEXT = decimal.Context(prec=40)


class ExactDecimal(TypeDecorator[decimal.Decimal]):
    """numeric(38, 10) on Postgres; text on SQLite, whose numeric columns keep only 15
    significant digits (the row would no longer match its event).

    On SQLite the value is stored with exactly 10 decimal places, so equal values have equal
    texts and equality filters compare exactly; ordering casts to a float (``Backend.comparable``).
    """

    impl = Numeric(38, DECIMAL_PLACES)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(Text())
        return dialect.type_descriptor(Numeric(38, DECIMAL_PLACES))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None or dialect.name != "sqlite":
            return value
        exact = decimal.Decimal(str(value)) if isinstance(value, float) else value
        return format(decimal.Decimal(exact).quantize(_DECIMAL_STEP, context=_DECIMAL_CONTEXT), "f")

    def process_result_value(self, value: Any, dialect: Dialect) -> decimal.Decimal | None:
        if value is None or isinstance(value, decimal.Decimal):
            return value
        return decimal.Decimal(str(value))


class MoneyColumn(TypeDecorator[Any]):
    """A money value: ``{"amount": "12.34", "currency": "EUR"}`` in and out, stored as
    ``{"minor": 1234, "currency": "EUR"}`` (JSON; see ``model.money``)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(JSONB() if dialect.name == "postgresql" else JSON())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else money.to_stored(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else money.from_stored(value)


def _column_type(declared: Field) -> TypeEngine[Any]:
    mapping: dict[str, TypeEngine[Any]] = {
        "text": String(declared.max_length or 200),
        "long_text": Text(),
        "json": Json,
        "integer": BigInteger(),
        "number": Float(),
        "decimal": ExactDecimal(),
        "boolean": Boolean(),
        "select": String(max((len(c) for c in declared.choices), default=1)),
        "timestamp": Timestamp,
        "date": Date(),
        "reference": Uuid(),
        "multi_select": Json,
        "timezone": String(64),
        "money": MoneyColumn(),
        "embedded": Json,
        "embedded_list": Json,
        "located_timestamp": Json,
        # The id of the uploaded file (``asanoha_files``): what the event holds too.
        "file": Uuid(),
        "image": Uuid(),
    }
    return mapping[declared.kind]


_Built = TypeVar("_Built")


@dataclass(frozen=True)
class Tables:
    """The tables of one registry, in one ``MetaData``."""

    metadata: MetaData
    events: Table
    outbox: Table
    job_runs: Table
    consumers: Table
    entities: dict[str, Table]
    #: Approval tokens minted by humans for agents' high-risk calls.
    agent_approvals: Table
    #: Who wrote each ``read_as_instruction`` field, through which entry, with which approval.
    instruction_provenance: Table
    #: The first outcome of each idempotent write, under its key.
    idempotency: Table
    #: Paused jobs and lanes.
    job_pauses: Table
    #: The data key of each (tenant, subject) of personal data, wrapped by a master key.
    subject_keys: Table
    #: The pending wake-up of each consumer partition (a row while one is pending).
    consumer_wakes: Table
    #: Events a consumer set aside for a tenant whose feature is switched off.
    consumer_parked: Table
    #: Each cron tick, open until its job rows are placed (see ``service/cron_ticks.py``).
    cron_ticks: Table
    #: Features' configuration values, sealed secrets and switches, per tenant.
    feature_settings: Table
    #: Aggregate states folded up to a stream version, personal values sealed.
    snapshots: Table
    #: Revoked bearer tokens by ``jti`` (until they would have expired).
    token_revocations: Table
    #: Personal access tokens: the digest of each secret, its owner and scopes.
    access_tokens: Table
    #: Workflow runs, their steps (the counters that start the next ones) and step items
    #: (one per job row of a step, with its sealed result); see ``platform/jobs/workflows.py``.
    workflow_runs: Table
    workflow_steps: Table
    workflow_items: Table
    workflow_waits: Table
    #: The sealed return value of each succeeded job row of a ``keep_result=True`` job.
    job_results: Table
    #: Uploaded files: who uploaded what, its digest and storage key, the row it belongs to.
    files: Table

    #: What brings stored events of the registry's types to their newest shape.
    upcasters: Upcasters = NO_UPCASTERS
    #: The tables of the declared projections, by projection QN (the application's own).
    projections: Mapping[str, Table] = field(default_factory=dict)
    #: The statements ``built`` keeps, by the function that builds each.
    _built: dict[Callable[[Tables], Any], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def entity(self, key: str) -> Table:
        """The table of the entity ``feature:name``."""
        return self.entities[key]

    def built(self, build: Callable[[Tables], _Built]) -> _Built:
        """``build(self)``, built on the first call and kept with these tables.

        For the statements of short reads on a hot path (a snapshot's load): building a
        SQLAlchemy statement and its cache key costs more Python time than the database
        takes to answer an indexed read, and a statement built once with ``bindparam``
        placeholders keeps its cache key. ``build`` is a module-level function: it names the
        statement. Two threads that build one at once build the same; either is kept.
        """
        found = self._built.get(build)
        if found is None:
            found = self._built.setdefault(build, build(self))
        return cast(_Built, found)


@functools.cache
def platform_tables() -> Tables:
    """The platform's own tables (events, outbox, job runs, consumers, ...), which are the
    same for every application: for code that serves any application, such as the bundled
    admin handlers."""
    return build_tables(Registry([]))


def build_tables(registry: Registry) -> Tables:
    """Declare every table the registry needs."""
    metadata = MetaData()
    events = Table(
        "asanoha_events",
        metadata,
        Column("id", Position, primary_key=True, autoincrement=True),
        Column("stream_id", String(64), nullable=False),
        Column("stream_type", String(200), nullable=False),
        Column("tenant_id", String(64), nullable=False),
        Column("version", Integer, nullable=False),
        Column("type", String(200), nullable=False),
        Column("schema_version", Integer, nullable=False, default=1),
        Column("payload", Json, nullable=False),
        Column("metadata", Json, nullable=False),
        Column("created_at", Timestamp, nullable=False),
        Column("created_by", String(64), nullable=False),
        # ``partition_key(tenant_id, stream_id)``: a partitioned consumer takes the events
        # whose key modulo its number of partitions is its partition.
        # (0 for a row inserted other than through ``append_event``.)
        Column("partition_key", Integer, nullable=False, server_default="0"),
        UniqueConstraint(
            "tenant_id", "stream_id", "version", name="uq_asanoha_events_stream_version"
        ),
        Index("ix_asanoha_events_type_id", "type", "id"),
        Index("ix_asanoha_events_stream_type_id", "stream_type", "id"),
        # The boot check's lowest and highest stored version of each type (``upcasting``).
        Index("ix_asanoha_events_type_schema_version", "type", "schema_version"),
    )
    refuse_payload_updates(events)
    # The job: one row per enqueue, written in the transaction that triggers it. The broker
    # message only points at it (task id = row id), so the row holds what the job runs on
    # and where each attempt stands: ``state`` pending (waiting for its next attempt),
    # running, succeeded, failed or cancelled; ``attempt`` the number of the last attempt
    # claimed.
    outbox = Table(
        "asanoha_outbox",
        metadata,
        Column("id", Uuid, primary_key=True),
        Column("job_qn", String(200), nullable=False),
        Column("payload", Json, nullable=False),
        Column("headers", Json, nullable=False),
        # The write handler's result, for write-triggered jobs (``ctx.trigger.result``).
        Column("trigger_result", Json, nullable=True),
        Column("state", String(16), nullable=False, default="pending"),
        Column("attempt", Integer, nullable=False, default=0),
        # The next attempt may not start before this time.
        Column("not_before", Timestamp, nullable=False),
        # The relay may publish the pending attempt from this time on: a while after the
        # write for fresh rows (their writer publishes them), at once after a failed publish,
        # at ``not_before`` for a retry held in the database; never before ``not_before``
        # (``outbox.relay_time``).
        Column("relay_after", Timestamp, nullable=False),
        Column("published_at", Timestamp, nullable=True),
        Column("publish_attempts", Integer, nullable=False, default=0),
        Column("last_error", Text, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("started_at", Timestamp, nullable=True),
        Column("finished_at", Timestamp, nullable=True),
        # Set for jobs that must be enqueued once per cause (an event-triggered job: the job
        # QN and the event id); a second enqueue with the same key is a no-op.
        Column("idempotency_key", String(300), nullable=True),
        # Who claimed the current attempt: a token per delivery, written by the claim and
        # kept by the attempt's end. A claim or an end sent again after its reply was lost
        # (the connection died after the commit) recognises its own committed write by it.
        Column("claim_token", String(32), nullable=True),
        # An operator asked the running attempt to stop (``ctx.cancel_requested``); an end
        # that wants another attempt cancels the row instead.
        Column("cancel_requested", Boolean, nullable=False, default=False),
        # 0..9, higher delivered first (its job's ``priority=`` or the dispatch's); ``None``:
        # no priority (the application declares none). The relay sends higher ones first.
        Column("priority", Integer, nullable=True),
        # The job's concurrency key (a digest of job, tenant and key value) for jobs with a
        # concurrency mode or ``unique_for``: enqueues and claims find the key's rows by it.
        Column("concurrency_key", String(64), nullable=True),
        # The job in its tenant, for jobs with ``max_per_tenant``: claims count its running rows.
        Column("slot_key", String(64), nullable=True),
        Index("ix_asanoha_outbox_due", "state", "relay_after"),
        Index("ix_asanoha_outbox_concurrency_key", "concurrency_key", "state"),
        Index("ix_asanoha_outbox_slot_key", "slot_key", "state"),
        Index("ix_asanoha_outbox_finished", "finished_at"),
        # The newest rows first (job-admin:query:jobs, the console): read backwards, it finds a
        # tenant's newest rows without sorting the table.
        Index("ix_asanoha_outbox_created", "created_at"),
        Index("uq_asanoha_outbox_idempotency_key", "idempotency_key", unique=True),
    )
    # Paused jobs and lanes (``asanoha jobs pause``): their rows stay pending, unclaimed
    # and unpublished until resumed. ``target`` is a job QN or ``lane:<name>``.
    job_pauses = Table(
        "asanoha_job_pauses",
        metadata,
        Column("target", String(220), primary_key=True),
        Column("paused_at", Timestamp, nullable=False),
        Column("paused_by", String(200), nullable=True),
    )
    # One row per ended attempt (succeeded, retrying, crashed or failed), written by the
    # worker when the attempt ends, in the transaction that ends it on the job row.
    job_runs = Table(
        "asanoha_job_runs",
        metadata,
        Column("id", Position, primary_key=True, autoincrement=True),
        Column("job_qn", String(200), nullable=False),
        Column("task_id", String(64), nullable=False),
        Column("tenant_id", String(64), nullable=True),
        Column("attempt", Integer, nullable=False),
        Column("status", String(16), nullable=False),
        Column("error", Text, nullable=True),
        Column("started_at", Timestamp, nullable=False),
        Column("finished_at", Timestamp, nullable=True),
        # What the attempt logged through ``ctx.log`` (INFO and above, bounded).
        Column("logs", Text, nullable=True),
        Index("ix_asanoha_job_runs_task", "task_id", "attempt"),
        Index("ix_asanoha_job_runs_finished", "finished_at"),
        # Ids are never reused, also on SQLite once the prune emptied the table: drain()
        # reports the runs above the last id it saw.
        sqlite_autoincrement=True,
    )
    consumers = Table(
        "asanoha_consumers",
        metadata,
        Column("name", String(200), primary_key=True),
        # One row per partition (0 to ``partitions`` - 1) of a partitioned consumer.
        Column("partition", Integer, primary_key=True, server_default="0"),
        Column("partitions", Integer, nullable=False, server_default="1"),
        # Every event up to ``position`` was handled, except the ``gaps``: ranges of ids below
        # it whose writer had not committed when the consumer passed them (Postgres only),
        # stored as ``[[first, last, bound], ...]``.
        Column("position", Position, nullable=False, default=0),
        Column("gaps", Json, nullable=False, default=list),
        # The event types it follows (kept in step with its definition when the app boots),
        # so its lag can be told from the database alone.
        Column("types", Json, nullable=False, default=list),
        Column("status", String(16), nullable=False, default="idle"),
        # Failed attempts at ``event_id``, the event the consumer is stopped at.
        Column("attempts", Integer, nullable=False, default=0),
        Column("event_id", Position, nullable=True),
        Column("last_error", Text, nullable=True),
        # When the next attempt at ``event_id`` may start (the consumer's backoff); ``None``
        # when it is not stopped, or dead there.
        Column("retry_at", Timestamp, nullable=True),
        # The status ``enable`` gives back to a disabled consumer (``dead`` stays dead);
        # ``None``: idle.
        Column("resume_status", String(16), nullable=True),
        # Events an operator skipped: [{"event_id", "error", "at"}].
        Column("skipped", Json, nullable=False, default=list),
        Column("updated_at", Timestamp, nullable=False),
    )
    entities = {
        entity_def.key: _entity_table(metadata, entity_def) for entity_def in registry.entities
    }
    return Tables(
        metadata,
        events,
        outbox,
        job_runs,
        consumers,
        entities,
        agent_approvals=_approvals_table(metadata),
        instruction_provenance=_provenance_table(metadata),
        idempotency=_idempotency_table(metadata),
        job_pauses=job_pauses,
        upcasters=upcasters_for(registry),
        subject_keys=_subject_keys_table(metadata),
        consumer_wakes=_consumer_wakes_table(metadata),
        consumer_parked=_consumer_parked_table(metadata),
        cron_ticks=_cron_ticks_table(metadata),
        feature_settings=_feature_settings_table(metadata),
        snapshots=_snapshots_table(metadata),
        projections={projection.qn: projection.table for projection in registry.projections},
        token_revocations=_token_revocations_table(metadata),
        access_tokens=_access_tokens_table(metadata),
        **_workflow_tables(metadata),
        job_results=_job_results_table(metadata),
        files=_files_table(metadata),
    )


def _approvals_table(metadata: MetaData) -> Table:
    """One row per approval token: what it admits, who approved, and when it was used.

    The token itself is never stored: it is an HMAC the server recomputes from the call.
    """
    return Table(
        "asanoha_agent_approvals",
        metadata,
        Column("id", Uuid, primary_key=True),
        Column("tenant_id", String(64), nullable=False),
        Column("handler_qn", String(200), nullable=False),
        Column("principal", String(64), nullable=False),
        Column("payload_digest", String(64), nullable=False),
        Column("target_id", String(64), nullable=True),
        Column("target_version", Integer, nullable=True),
        Column("summary", Text, nullable=False),
        Column("approved_by", String(64), nullable=False),
        Column("channel", String(64), nullable=False),
        Column("agent_run", String(200), nullable=True),
        Column("tool_call", String(200), nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("expires_at", Timestamp, nullable=False),
        Column("used_at", Timestamp, nullable=True),
        Column("used_by_request", String(64), nullable=True),
    )


def _provenance_table(metadata: MetaData) -> Table:
    """One row per successful write of one ``read_as_instruction`` field of one row."""
    table = Table(
        "asanoha_instruction_provenance",
        metadata,
        Column("id", Position, primary_key=True, autoincrement=True),
        Column("tenant_id", String(64), nullable=False),
        Column("entity", String(200), nullable=False),
        Column("row_id", String(64), nullable=False),
        Column("field", String(200), nullable=False),
        Column("writer", String(64), nullable=False),
        #: human | agent | system
        Column("writer_kind", String(16), nullable=False),
        Column("agent_run", String(200), nullable=True),
        Column("entry_qn", String(200), nullable=True),
        Column("entry_risk", String(8), nullable=True),
        Column("approval_id", Uuid, nullable=True),
        Column("payload_digest", String(64), nullable=False),
        Column("created_at", Timestamp, nullable=False),
    )
    Index(
        "ix_asanoha_instruction_provenance_row",
        table.c.tenant_id,
        table.c.entity,
        table.c.row_id,
        table.c.field,
        table.c.id,
    )
    return table


def _idempotency_table(metadata: MetaData) -> Table:
    """One row per idempotency key of a caller and handler: the write's first outcome.

    The row is inserted before the write runs, in the write's transaction, so a second
    request with the key waits on the primary key until the first commits or rolls back;
    ``status`` and ``body`` are set before the commit, so a committed row always holds an
    outcome.
    """
    return Table(
        "asanoha_idempotency",
        metadata,
        Column("tenant_id", String(64), primary_key=True),
        Column("principal", String(64), primary_key=True),
        Column("handler_qn", String(200), primary_key=True),
        Column("key", String(255), primary_key=True),
        Column("payload_digest", String(64), nullable=False),
        Column("status", Integer, nullable=True),
        Column("body", Json, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("expires_at", Timestamp, nullable=False),
        Index("ix_asanoha_idempotency_expires", "expires_at"),
    )


def _consumer_parked_table(metadata: MetaData) -> Table:
    """One row per event a consumer parked for a tenant whose feature was switched off (see
    ``consumers/parking.py``): the consumer's position moved past it, and the row is what
    delivers it once the feature is on again."""
    return Table(
        "asanoha_consumer_parked",
        metadata,
        Column("name", String(200), primary_key=True),
        Column("event_id", Position, primary_key=True),
        Column("tenant_id", String(64), nullable=False),
        # The event's, so that each partition finds its own after a repartition.
        Column("partition_key", Integer, nullable=False),
        Column("parked_at", Timestamp, nullable=False),
        Index("ix_asanoha_consumer_parked_tenant", "name", "tenant_id", "event_id"),
    )


def _consumer_wakes_table(metadata: MetaData) -> Table:
    """One row per consumer partition whose wake-up task is pending or running (see
    ``consumers/wakes.py``): the row, not a timer, is what keeps a burst of writes to one
    wake-up task per partition."""
    return Table(
        "asanoha_consumer_wakes",
        metadata,
        Column("name", String(200), primary_key=True),
        Column("partition", Integer, primary_key=True),
        # Which task owns the row: only that task's round may clear or end it.
        Column("token", String(32), nullable=False),
        # A write committed since the task's round began: it runs one more round.
        Column("again", Boolean, nullable=False, default=False),
        # Past this time the task is taken as lost (its message expired or was dropped), and
        # the next write arms a new one.
        Column("until", Timestamp, nullable=False),
    )


def _cron_ticks_table(metadata: MetaData) -> Table:
    """One row per tick of a cron job (see ``service/cron_ticks.py``): open (``done_at`` null)
    until the transaction that places its job rows closes it; the newest closed one is where
    ``catch_up`` starts, and outlives the prune of job rows."""
    return Table(
        "asanoha_cron_ticks",
        metadata,
        Column("job_qn", String(200), primary_key=True),
        # The scheduled time as beat sent it: the text in the job rows' idempotency keys.
        Column("tick", String(64), primary_key=True),
        Column("tick_at", Timestamp, nullable=False),
        Column("opened_at", Timestamp, nullable=False),
        Column("done_at", Timestamp, nullable=True),
    )


def _workflow_tables(metadata: MetaData) -> dict[str, Table]:
    """A workflow run (``asanoha_workflow_runs``), the state and counters of each of its
    steps (``asanoha_workflow_steps``), and one row per job row of a step
    (``asanoha_workflow_items``: a mapped step has one per item) holding its sealed result;
    one row per wait step of a run (``asanoha_workflow_waits``), written when the run starts,
    that the first matching event marks."""
    runs = Table(
        "asanoha_workflow_runs",
        metadata,
        Column("id", Uuid, primary_key=True),
        Column("workflow_qn", String(200), nullable=False),
        Column("tenant_id", String(64), nullable=False),
        # running, succeeded, failed, cancelled
        Column("state", String(16), nullable=False),
        Column("payload", Json, nullable=False),
        # What every step's job row carries: tenant, who started it, the chain's origin.
        Column("headers", Json, nullable=False),
        # Steps not yet succeeded: the end that brings it to 0 ends the run.
        Column("steps_left", Integer, nullable=False),
        Column("result", Json, nullable=True),
        Column("error", Text, nullable=True),
        Column("failed_step", String(100), nullable=True),
        Column("failed_item", Integer, nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("finished_at", Timestamp, nullable=True),
        Index("ix_asanoha_workflow_runs_state", "state", "created_at"),
    )
    steps = Table(
        "asanoha_workflow_steps",
        metadata,
        Column("run_id", Uuid, primary_key=True),
        Column("step", String(100), primary_key=True),
        # waiting, running, succeeded, failed, cancelled
        Column("state", String(16), nullable=False),
        # Steps it comes after that have not succeeded: the end that brings it to 0 starts it.
        Column("remaining", Integer, nullable=False),
        # Its items not yet succeeded (``None``: not started).
        Column("items_left", Integer, nullable=True),
    )
    items = Table(
        "asanoha_workflow_items",
        metadata,
        Column("run_id", Uuid, primary_key=True),
        Column("step", String(100), primary_key=True),
        Column("item", Integer, primary_key=True),
        Column("job_id", Uuid, nullable=False),
        Column("state", String(16), nullable=False),
        Column("result", Json, nullable=True),
        Column("error", Text, nullable=True),
        Index("uq_asanoha_workflow_items_job", "job_id", unique=True),
    )
    waits = Table(
        "asanoha_workflow_waits",
        metadata,
        Column("run_id", Uuid, primary_key=True),
        Column("step", String(100), primary_key=True),
        Column("workflow_qn", String(200), nullable=False),
        Column("tenant_id", String(64), nullable=False),
        Column("event_type", String(200), nullable=False),
        # SHA-256 of the run payload's matched values: a wait's key without its values.
        Column("match_key", String(64), nullable=False),
        Column("created_at", Timestamp, nullable=False),
        # The event that matched (``None``: none yet), set once; ``event``: the step's
        # result it makes, sealed (its personal values stay ciphertext).
        Column("event_id", BigInteger, nullable=True),
        Column("event", Json, nullable=True),
        Column("matched_at", Timestamp, nullable=True),
        Index("ix_asanoha_workflow_waits_match", "event_type", "tenant_id", "match_key"),
    )
    return {
        "workflow_runs": runs,
        "workflow_steps": steps,
        "workflow_items": items,
        "workflow_waits": waits,
    }


def _job_results_table(metadata: MetaData) -> Table:
    """One row per succeeded job row of a ``keep_result=True`` job: its return value, sealed
    like its payload (``app.jobs.result`` reads it; the prune deletes it with its row)."""
    return Table(
        "asanoha_job_results",
        metadata,
        Column("job_id", Uuid, primary_key=True),
        Column("result", Json, nullable=True),
        Column("created_at", Timestamp, nullable=False),
    )


def _files_table(metadata: MetaData) -> Table:
    """One row per uploaded file (``POST /api/files``): its name, type, size and SHA-256,
    where its content is stored, and, once a write's file field names it, the row it
    belongs to. Forgetting that row's subject deletes the content and marks the row."""
    return Table(
        "asanoha_files",
        metadata,
        Column("id", Uuid, primary_key=True),
        Column("tenant_id", String(64), nullable=False),
        Column("uploaded_by", String(64), nullable=False),
        Column("name", String(255), nullable=False),
        Column("content_type", String(255), nullable=False),
        Column("size", BigInteger, nullable=False),
        Column("sha256", String(64), nullable=False),
        #: Where the storage backend keeps the content (a path below its folder or prefix).
        Column("storage_key", String(300), nullable=False),
        Column("created_at", Timestamp, nullable=False),
        #: The entity, row and field that hold it (``None``: not written to a row yet).
        Column("entity", String(200), nullable=True),
        Column("row_id", String(64), nullable=True),
        Column("field", String(200), nullable=True),
        #: Whose personal data the row holding it is: the row itself, or the subject its
        #: personal fields are about (``personal={"of": "<field>"}``); forgetting that
        #: subject deletes the file.
        Column("subject", String(200), nullable=True),
        Column("attached_at", Timestamp, nullable=True),
        #: When it was deleted: its row's subject forgotten, its row deleted for good, or
        #: an upload no write took in time (its content is deleted after the commit).
        Column("deleted_at", Timestamp, nullable=True),
        #: When its content left the storage backend.
        Column("purged_at", Timestamp, nullable=True),
        Index("ix_asanoha_files_row", "tenant_id", "row_id"),
        Index("ix_asanoha_files_subject", "tenant_id", "subject"),
        Index("ix_asanoha_files_purge", "deleted_at", "purged_at"),
        # The uploads no write took (``row_id`` null), oldest first: the hourly prune's.
        Index("ix_asanoha_files_unattached", "row_id", "created_at"),
    )


def _snapshots_table(metadata: MetaData) -> Table:
    """One row per aggregate state kept at a stream version (``store/snapshots.py``): its
    personal values hold the events' sealed texts, so forgetting a subject makes them
    unreadable like the events themselves."""
    return Table(
        "asanoha_snapshots",
        metadata,
        Column("tenant_id", String(64), primary_key=True),
        Column("aggregate", String(200), primary_key=True),
        Column("stream_id", String(64), primary_key=True),
        #: The stream version of the last event folded into ``state``.
        Column("stream_version", Integer, primary_key=True),
        #: The aggregate's shape (``AggregateDef.version``): another one ignores the row.
        Column("aggregate_version", String(80), nullable=False),
        #: The global position of the last event folded into ``state``.
        Column("position", Position, nullable=False),
        Column("state", Json, nullable=True),
        Column("created_at", Timestamp, nullable=False),
    )


def _token_revocations_table(metadata: MetaData) -> Table:
    """One row per revoked token of a tenant, kept until the token would have expired:
    every API process reads the unexpired rows every few seconds."""
    return Table(
        "asanoha_token_revocations",
        metadata,
        Column("tenant_id", String(64), primary_key=True),
        Column("jti", String(200), primary_key=True),
        Column("revoked_by", String(64), nullable=False),
        Column("revoked_at", Timestamp, nullable=False),
        Column("expires_at", Timestamp, nullable=False),
        Index("ix_asanoha_token_revocations_expires", "expires_at"),
    )


def _access_tokens_table(metadata: MetaData) -> Table:
    """One row per personal access token: the SHA-256 of its secret (never the secret), who
    it acts for, with which roles and QN-pattern scopes, until when."""
    return Table(
        "asanoha_access_tokens",
        metadata,
        Column("id", String(64), primary_key=True),
        Column("token_hash", String(64), nullable=False, unique=True),
        Column("tenant_id", String(64), nullable=False),
        Column("user_id", String(64), nullable=False),
        Column("name", String(200), nullable=False),
        Column("roles", Json, nullable=False),
        Column("scopes", Json, nullable=False),
        Column("agent", String(200), nullable=True),
        Column("created_by", String(64), nullable=False),
        Column("created_at", Timestamp, nullable=False),
        Column("expires_at", Timestamp, nullable=False),
        Column("revoked_at", Timestamp, nullable=True),
        Index("ix_asanoha_access_tokens_owner", "tenant_id", "user_id"),
    )


def _subject_keys_table(metadata: MetaData) -> Table:
    """One data key per (tenant, subject) of personal data, wrapped by a master key; a
    forgotten subject keeps its row (who, when, why) without the key."""
    return Table(
        "asanoha_subject_keys",
        metadata,
        Column("tenant_id", String(64), primary_key=True),
        Column("subject", String(200), primary_key=True),
        #: The wrapped data key (base64); ``NULL`` once the subject is forgotten.
        Column("wrapped_key", Text, nullable=True),
        #: Which master key wrapped it.
        Column("master_key_id", String(64), nullable=True),
        Column("created_at", Timestamp, nullable=False),
        Column("forgotten_at", Timestamp, nullable=True),
        Column("forgotten_by", String(64), nullable=True),
        Column("forgotten_reason", Text, nullable=True),
    )


def _entity_table(metadata: MetaData, entity_def: EntityDef) -> Table:
    entity = entity_def.entity
    # Keyed by (tenant, id) like the event streams: an id is only ever looked up within a
    # tenant, and a key on the id alone would tell one tenant which ids another one uses.
    columns: list[Column[Any] | PrimaryKeyConstraint] = [
        Column("id", Uuid, nullable=False),
        Column("tenant_id", String(64), nullable=False),
        PrimaryKeyConstraint("tenant_id", "id"),
        Column("version", Integer, nullable=False),
        Column("created_at", Timestamp, nullable=False),
        Column("created_by", String(64), nullable=False),
        Column("modified_at", Timestamp, nullable=False),
        Column("modified_by", String(64), nullable=False),
    ]
    if entity.soft_delete:
        columns += [
            Column("is_deleted", Boolean, nullable=False, default=False),
            Column("deleted_at", Timestamp, nullable=True),
            Column("deleted_by", String(64), nullable=True),
        ]
    indexed = blind_indexed_fields(entity)
    for name, declared in entity.fields.items():
        # A personal value is held as its ciphertext (text, whatever the field's kind); an
        # equality filter or unique index on it uses its blind index column.
        kind = Text() if declared.is_personal else _column_type(declared)
        columns.append(Column(name, kind, nullable=True))
        if name in indexed:
            columns.append(Column(blind_column(name), String(64), nullable=True))
    table = Table(entity.table, metadata, *columns)

    def compared(name: str) -> Column[Any]:
        return table.c[blind_column(name) if name in indexed else name]

    for name, declared in entity.fields.items():
        if declared.sortable or declared.filterable:
            Index(f"ix_{entity.table}_{name}", table.c.tenant_id, compared(name))
    for fields_ in entity.unique:
        Index(
            f"uq_{entity.table}_{'_'.join(fields_)}",
            table.c.tenant_id,
            *(compared(name) for name in fields_),
            unique=True,
        )
    # The GIN index of a list's search (Postgres only; see ``store.search``).
    search_index(table, entity)
    return table


def _feature_settings_table(metadata: MetaData) -> Table:
    """One row per tenant, feature, kind and key: a feature's configuration value, sealed
    secret or switch (see ``store/feature_settings_rows``)."""
    return Table(
        "asanoha_feature_settings",
        metadata,
        Column("tenant_id", String(64), primary_key=True),
        Column("feature", String(100), primary_key=True),
        Column("kind", String(16), primary_key=True),
        Column("key", String(100), primary_key=True),
        Column("value", Json, nullable=False),
        Column("updated_at", Timestamp, nullable=False),
        Column("updated_by", String(200), nullable=True),
    )
