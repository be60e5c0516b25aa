"""``Registry``: a validated, immutable view of a set of features."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.aggregates import AggregateDef, resolve_handlers
from asanoha.platform.model.feature import Feature
from asanoha.platform.model.fields import OnDelete
from asanoha.platform.model.handlers import (
    ConsumerDef,
    EntityDef,
    EventDef,
    HandlerDef,
    JobDef,
    PostSaveHook,
    PreSaveHook,
    StreamHandlerDef,
)
from asanoha.platform.model.hooks import Hook, HookKind
from asanoha.platform.model.names import parse_qn
from asanoha.platform.model.projections import ProjectionDef
from asanoha.platform.model.workflows import WorkflowDef

_Def = TypeVar("_Def", HandlerDef, EventDef, JobDef, ConsumerDef, StreamHandlerDef)


@dataclass(frozen=True)
class Reference:
    """A reference field resolved: the entity that holds it, its name, the entity it refers
    to, the field that labels a referenced row (``None``: no label) and ``on_delete``."""

    entity: EntityDef
    field: str
    target: EntityDef
    label_field: str | None
    on_delete: OnDelete


class Registry:
    """Every definition of an application, looked up by qualified name.

    Building it checks what no single feature can: duplicate names and tables, job triggers
    and consumer subscriptions that name nothing.
    """

    def __init__(self, features: Iterable[Feature]) -> None:
        self.features: tuple[Feature, ...] = tuple(features)
        self._handlers: dict[str, HandlerDef] = {}
        self._events: dict[str, EventDef] = {}
        self._jobs: dict[str, JobDef] = {}
        self._consumers: dict[str, ConsumerDef] = {}
        self._streams: dict[str, StreamHandlerDef] = {}
        self._entities: dict[str, EntityDef] = {}
        self._aggregates: dict[str, AggregateDef] = {}
        self._projections: dict[str, ProjectionDef] = {}
        self._projections_on: dict[str, tuple[ProjectionDef, ...]] = {}
        self._pre_save: dict[str, tuple[PreSaveHook, ...]] = {}
        self._post_save: dict[str, tuple[PostSaveHook, ...]] = {}
        self._hooks: dict[tuple[HookKind, str], tuple[Hook, ...]] = {}
        self._workflows: dict[str, WorkflowDef] = {}
        names: set[str] = set()
        for feature in self.features:
            if feature.name in names:
                raise DefinitionError(f"feature {feature.name!r} is registered twice")
            names.add(feature.name)
            self._collect(feature)
        self._check_tables()
        self._check_triggers()
        self._resolve_aggregates()
        self._collect_projections()
        self._references = self._resolve_references()
        self._children = self._resolve_children()
        for feature in self.features:
            feature.freeze()
        self._by_trigger: dict[str, tuple[JobDef, ...]] = {}
        for job in self._jobs.values():
            if job.on is not None:
                self._by_trigger[job.on] = (*self._by_trigger.get(job.on, ()), job)

    def _collect(self, feature: Feature) -> None:
        self._add(self._handlers, feature.handlers)
        self._add(self._events, feature.events)
        self._add(self._jobs, feature.jobs)
        self._add(self._consumers, feature.consumers)
        self._add(self._streams, feature.streams)
        for workflow in feature.workflows:
            if self._is_taken(workflow.qn) or workflow.qn in self._workflows:
                raise DefinitionError(f"qualified name {workflow.qn!r} is defined twice")
            if not workflow.steps:
                raise DefinitionError(f"{workflow.qn} declares no step")
            self._workflows[workflow.qn] = workflow
        for entity_def in feature.entities.values():
            if entity_def.entity.shared and feature.system_scope is None:
                raise DefinitionError(
                    f"entity {entity_def.key} is shared (every tenant reads its rows): only a "
                    f'feature declared Feature({feature.name!r}, system_scope="<reason>") '
                    "writes shared rows; declare it so, or drop shared=True"
                )
            self._entities[entity_def.key] = entity_def
        for name, pre in feature.pre_save_hooks.items():
            self._pre_save[self._hook_target(feature, name)] = tuple(pre)
        for name, post in feature.post_save_hooks.items():
            self._post_save[self._hook_target(feature, name)] = tuple(post)
        for kind, by_entity in feature.entity_hooks.items():
            for name, hooks in by_entity.items():
                self._hooks[kind, self._hook_target(feature, name)] = tuple(hooks)

    def _add(self, table: dict[str, _Def], items: Iterable[_Def]) -> None:
        for item in items:
            if self._is_taken(item.qn):
                raise DefinitionError(f"qualified name {item.qn!r} is defined twice")
            table[item.qn] = item

    def _is_taken(self, qn: str) -> bool:
        return any(
            qn in table
            for table in (self._handlers, self._events, self._jobs, self._consumers, self._streams)
        )

    def _hook_target(self, feature: Feature, name: str) -> str:
        key = f"{feature.name}:{name}"
        if key not in self._entities:
            raise DefinitionError(
                f"feature {feature.name!r}: a save hook names unknown entity {name!r}"
            )
        return key

    def _check_tables(self) -> None:
        seen: dict[str, str] = {}
        for key, entity_def in self._entities.items():
            table = entity_def.entity.table
            if table.startswith("asanoha_"):
                raise DefinitionError(
                    f"entity {key}: table names starting with 'asanoha_' are reserved"
                )
            if table in seen:
                raise DefinitionError(f"entities {seen[table]} and {key} both use table {table!r}")
            seen[table] = key

    def _check_triggers(self) -> None:
        for job in self._jobs.values():
            if job.on is None:
                continue
            try:
                target = parse_qn(job.on)
            except ValueError as exc:
                raise DefinitionError(f"{job.qn}: on={job.on!r} is not a qualified name") from exc
            if target.kind == "write" and job.on not in self._handlers:
                raise DefinitionError(f"{job.qn}: on={job.on!r} names no registered write handler")
            if target.kind == "event" and job.on not in self._events:
                raise DefinitionError(f"{job.qn}: on={job.on!r} names no declared event")
            if target.kind not in ("write", "event"):
                raise DefinitionError(
                    f"{job.qn}: on= takes a write handler or an event, not {job.on!r}"
                )
        for workflow in self._workflows.values():
            if workflow.on is not None and workflow.on not in self._handlers:
                raise DefinitionError(
                    f"{workflow.qn}: on={workflow.on!r} names no registered write handler"
                )
            for step in workflow.waits:
                assert step.hold is not None
                if step.hold.event not in self._events:
                    raise DefinitionError(
                        f"{workflow.qn}: step {step.name!r} waits for {step.hold.event!r}, "
                        "which no feature declares"
                    )
        for consumer in self._consumers.values():
            for event in consumer.on:
                if event not in self._events:
                    raise DefinitionError(f"{consumer.qn}: on= names undeclared event {event!r}")

    def _resolve_references(self) -> dict[str, tuple[Reference, ...]]:
        """Every reference field with the entity it names and the field that labels it."""
        found: dict[str, tuple[Reference, ...]] = {}
        for key, entity_def in self._entities.items():
            resolved = []
            for name, declared in entity_def.entity.fields.items():
                if declared.kind != "reference":
                    continue
                where = (
                    f"feature {entity_def.feature!r}, entity {entity_def.name!r}, field {name!r}"
                )
                named = str(declared.references)
                target_key = named if ":" in named else f"{entity_def.feature}:{named}"
                target = self._entities.get(target_key)
                if target is None:
                    raise DefinitionError(
                        f"{where}: reference({named!r}) names no registered entity; name it "
                        "'<feature>:<entity>' (or '<entity>' of the same feature)"
                    )
                label = declared.label_field or target.entity.label_field
                if label is not None and label not in target.entity.fields:
                    raise DefinitionError(
                        f"{where}: label_field={label!r} names no field of {target_key} "
                        f"(fields: {sorted(target.entity.fields)})"
                    )
                resolved.append(Reference(entity_def, name, target, label, declared.on_delete))
            found[key] = tuple(resolved)
        return found

    def _collect_projections(self) -> None:
        tables = {entity_def.entity.table: entity_def.key for entity_def in self.entities}
        for feature in self.features:
            for projection in feature.projections:
                if self._is_taken(projection.qn) or projection.qn in self._projections:
                    raise DefinitionError(f"qualified name {projection.qn!r} is defined twice")
                name = projection.table.name
                if name in tables:
                    raise DefinitionError(
                        f"{projection.qn}: table {name!r} is already {tables[name]}'s"
                    )
                tables[name] = projection.qn
                for event in projection.on:
                    if event not in self._events:
                        raise DefinitionError(
                            f"{projection.qn}: on= names undeclared event {event!r}"
                        )
                    if projection.mode == "inline":
                        followers = self._projections_on.get(event, ())
                        self._projections_on[event] = (*followers, projection)
                if projection.mode == "async" and self._is_taken(projection.consumer_qn):
                    raise DefinitionError(
                        f"{projection.qn}: its consumer's name {projection.consumer_qn!r} is "
                        "taken; name the projection or the consumer otherwise"
                    )
                self._projections[projection.qn] = projection

    def _resolve_aggregates(self) -> None:
        event_features = {qn: event.feature for qn, event in self._events.items()}
        for feature in self.features:
            for aggregate in feature.aggregates.values():
                handlers = resolve_handlers(aggregate, event_features)
                self._aggregates[aggregate.key] = dataclasses.replace(aggregate, handlers=handlers)

    # -- lookups ----------------------------------------------------------------------------

    def _resolve_children(self) -> dict[tuple[str, str], tuple[EntityDef, Reference]]:
        """Each ``has_many`` of each entity: the child's registered entity and its reference
        field that refers to the parent (definition errors name the relation)."""
        found: dict[tuple[str, str], tuple[EntityDef, Reference]] = {}
        for entity_def in self.entities:
            for name, relation in entity_def.entity.children.items():
                where = f"entity {entity_def.key}: has_many {name!r}"
                child = next((d for d in self.entities if d.entity is relation.entity), None)
                if child is None:
                    raise DefinitionError(
                        f"{where}: its entity (table {relation.entity.table!r}) is not "
                        "registered by any feature (feature.crud(...) or feature.entity(...))"
                    )
                via = next((r for r in self.references(child.key) if r.field == relation.via), None)
                if via is None or via.target.key != entity_def.key:
                    raise DefinitionError(
                        f"{where}: {child.key}.{relation.via} must refer to {entity_def.key}"
                    )
                found[entity_def.key, name] = (child, via)
        return found

    def child(self, entity_key: str, name: str) -> tuple[EntityDef, Reference]:
        """The child entity of the ``has_many`` ``name`` of ``entity_key`` and its reference
        field to the parent."""
        return self._children[entity_key, name]

    def references(self, entity_key: str) -> tuple[Reference, ...]:
        """The reference fields of the entity ``feature:name``."""
        return self._references.get(entity_key, ())

    def referrers(self, entity_key: str) -> tuple[Reference, ...]:
        """The reference fields of every entity that refer to ``feature:name``."""
        return tuple(
            reference
            for references in self._references.values()
            for reference in references
            if reference.target.key == entity_key
        )

    def handler(self, qn: str) -> HandlerDef:
        """The write or query handler ``qn``; ``KeyError`` when there is none."""
        return self._handlers[qn]

    def find_handler(self, qn: str) -> HandlerDef | None:
        """The handler ``qn`` or ``None``."""
        return self._handlers.get(qn)

    @property
    def handlers(self) -> tuple[HandlerDef, ...]:
        """Every write and query handler."""
        return tuple(self._handlers.values())

    def entity(self, key: str) -> EntityDef:
        """The entity registered as ``feature:name``."""
        return self._entities[key]

    def find_entity(self, key: str) -> EntityDef | None:
        """The entity ``feature:name`` or ``None``."""
        return self._entities.get(key)

    @property
    def entities(self) -> tuple[EntityDef, ...]:
        """Every registered entity."""
        return tuple(self._entities.values())

    def find_projection(self, qn: str) -> ProjectionDef | None:
        """The declared projection ``qn`` or ``None``."""
        return self._projections.get(qn)

    @property
    def projections(self) -> tuple[ProjectionDef, ...]:
        """Every declared projection."""
        return tuple(self._projections.values())

    def is_system_scope(self, feature: str) -> bool:
        """Whether the feature ``feature`` is declared ``system_scope=`` (it writes shared
        rows and reads other tenants' rows, audited)."""
        return any(
            declared.name == feature and declared.system_scope is not None
            for declared in self.features
        )

    def projections_on(self, event_type: str) -> tuple[ProjectionDef, ...]:
        """The inline projections that follow events of ``event_type`` (kept in the write's
        transaction)."""
        return self._projections_on.get(event_type, ())

    def find_aggregate(self, key: str) -> AggregateDef | None:
        """The aggregate ``feature:name`` (its ``apply_<event>`` methods resolved) or
        ``None``."""
        return self._aggregates.get(key)

    @property
    def aggregates(self) -> tuple[AggregateDef, ...]:
        """Every declared aggregate."""
        return tuple(self._aggregates.values())

    def event(self, qn: str) -> EventDef | None:
        """The declared event ``qn`` or ``None``."""
        return self._events.get(qn)

    @property
    def events(self) -> tuple[EventDef, ...]:
        """Every declared event."""
        return tuple(self._events.values())

    def job(self, qn: str) -> JobDef | None:
        """The job ``qn`` or ``None``."""
        return self._jobs.get(qn)

    @property
    def jobs(self) -> tuple[JobDef, ...]:
        """Every job."""
        return tuple(self._jobs.values())

    def jobs_triggered_by(self, qn: str) -> tuple[JobDef, ...]:
        """The jobs declared with ``on=qn``."""
        return self._by_trigger.get(qn, ())

    def workflow(self, qn: str) -> WorkflowDef | None:
        """The workflow ``qn`` or ``None``."""
        return self._workflows.get(qn)

    @property
    def workflows(self) -> tuple[WorkflowDef, ...]:
        """Every workflow."""
        return tuple(self._workflows.values())

    def workflows_triggered_by(self, qn: str) -> tuple[WorkflowDef, ...]:
        """The workflows declared with ``on=qn`` (a write handler)."""
        return tuple(workflow for workflow in self._workflows.values() if workflow.on == qn)

    @property
    def job_trigger_events(self) -> tuple[str, ...]:
        """The event QNs some job is declared ``on=`` (the job-trigger consumer follows them)."""
        return tuple(qn for qn in self._by_trigger if qn in self._events)

    @property
    def consumers(self) -> tuple[ConsumerDef, ...]:
        """Every consumer."""
        return tuple(self._consumers.values())

    @property
    def streams(self) -> tuple[StreamHandlerDef, ...]:
        """Every stream handler."""
        return tuple(self._streams.values())

    def stream(self, qn: str) -> StreamHandlerDef | None:
        """The stream handler ``qn``, or ``None``."""
        return self._streams.get(qn)

    def pre_save_hooks(self, entity_key: str) -> tuple[PreSaveHook, ...]:
        """Pre-save hooks of the entity ``feature:name``."""
        return self._pre_save.get(entity_key, ())

    def post_save_hooks(self, entity_key: str) -> tuple[PostSaveHook, ...]:
        """Post-save hooks of the entity ``feature:name``."""
        return self._post_save.get(entity_key, ())

    def hooks(self, kind: HookKind, entity_key: str) -> tuple[Hook, ...]:
        """The ``kind`` hooks (validate, pre_delete, post_delete, after_commit) of the
        entity ``feature:name``, in the order they were declared."""
        return self._hooks.get((kind, entity_key), ())
