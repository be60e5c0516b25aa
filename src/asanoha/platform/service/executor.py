"""The entity executor: create, update, delete, restore, forget and anonymize of one entity.

Per write verb, in this order: validation, defaults, pre-save hooks, the personal-data gate,
the instruction-field gate, ownership, event append with the expected stream version,
projection row, post-save hooks. Irreversible verbs pass their gate before any read. The
executor reads as the entity reader does (``entity_reader``); every row write passes through
``_record``, the one place its event is appended and projected.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, exc, select

from asanoha.platform.errors import (
    AsanohaError,
    ConflictError,
    NotFoundError,
    Reasons,
    UnprocessableError,
    VersionConflictError,
)
from asanoha.platform.model import EntityDef, SessionUser
from asanoha.platform.model.field_rules import bounded_fields, check_values
from asanoha.platform.model.relations import nested_relations
from asanoha.platform.model.transitions import check_move
from asanoha.platform.personal import entities as personal_entities
from asanoha.platform.personal.blind_index import blind_indexed_fields
from asanoha.platform.service import (
    erasure,
    field_access,
    files,
    gates,
    ownership,
    provenance,
    references,
    row_retention,
)
from asanoha.platform.service.entity_reader import EntityReader, ExecutorEnv
from asanoha.platform.service.event_metadata import event_metadata
from asanoha.platform.service.request import Request
from asanoha.platform.service.write_values import run_pre_save, run_validate, validated_values
from asanoha.platform.store import StoredEvent, append_event, apply_entity_event
from asanoha.platform.store.declared_projections import apply_declared_projections
from asanoha.platform.store.events import SubjectKeyExists
from asanoha.platform.store.projections import Row, encode_values


class EntityExecutor(EntityReader):
    """Reads and writes one entity for one caller: what a write handler gets."""

    def __init__(
        self,
        env: ExecutorEnv,
        conn: Connection,
        entity_def: EntityDef,
        user: SessionUser,
        request: Request,
        handler_qn: str | None,
    ) -> None:
        super().__init__(env, conn, entity_def, user, request, handler_qn)
        #: The write request every verb runs in (its gates read it).
        self._write_request = request

    # -- writes -----------------------------------------------------------------------------
    #
    # Every verb that changes a row locks it first, then appends its event, then projects it:
    # one lock order for all writers of a stream (domain events on an entity stream too), so
    # concurrent writers queue on the row instead of deadlocking on the event's unique key.
    # The row carries its stream's version, so the version a reader sees is the one to send.

    def create(self, data: Mapping[str, Any]) -> Row:
        """Create a row (a new stream). ``data`` may carry an ``id`` for the new stream."""
        self._check_shared("create")
        data = dict(data)
        raw_id = data.pop("id", None)
        stream_id = self._parse_id(raw_id) if raw_id is not None else uuid.uuid4()
        stream = str(stream_id)
        entity = self.entity_def.entity
        model = entity.create_model()
        owner = self._owner_rule("write")
        filled = ownership.owner_default(owner, self.entity_def, data, self._user) if owner else {}
        values = validated_values(model, {**filled, **data}, self._handler_qn)
        # Nested children are created after their parent, each a create of its own.
        children = {name: values.pop(name) for name in nested_relations(entity) if name in values}
        given = dict(values)
        for name, declared in entity.fields.items():
            if name not in values and declared.has_default:
                default = declared.default
                values[name] = default() if callable(default) else default
        values = run_pre_save(
            self._env.registry,
            self.entity_def,
            values,
            None,
            is_new=True,
            model=model,
        )
        run_validate(
            self._env.registry, self.entity_def, self._handler_qn, values, None, is_new=True
        )
        self._check_field_rules(values)
        self._check_write_gates("create", values)
        self._check_transitions(None, values)
        self._check_field_writes("create", given, frozenset(given) - frozenset(filled))
        self._check_references(values)
        attachments = self._check_files(stream, values)
        row = self._record(
            stream,
            0,
            "created",
            self._sealed("data", stream, values, None),
            may_conflict=bool(entity.unique),
            attachments=attachments,
        )
        assert row is not None
        for name, items in children.items():
            row = {**row, name: self._create_children(name, stream_id, items or [])}
        return row

    def _create_children(self, name: str, parent: uuid.UUID, items: list[Any]) -> list[Row]:
        """Create the nested children ``items`` of the ``has_many`` ``name`` of the new row
        ``parent``, each through the child entity's own create (its rules, gates, events),
        in this transaction; the caller's handler writes them."""
        child_def, via = self._env.registry.child(self.entity_def.key, name)
        child = EntityExecutor(
            self._env, self._conn, child_def, self._user, self._write_request, self._handler_qn
        )
        created: list[Row] = []
        for index, item in enumerate(items):
            try:
                created.append(child.create({**item, via.field: parent}))
            except AsanohaError as error:
                raise _under(error, f"{name}.{index}") from None
        return created

    def update(
        self,
        id: uuid.UUID | str,
        changes: Mapping[str, Any],
        version: int | None = None,
        skip_optimistic_lock: bool = False,
    ) -> Row:
        """Apply ``changes``. ``version`` is the version the caller read (checked unless skipped)."""
        self._check_shared("update")
        if version is None and not skip_optimistic_lock:
            # A TypeError, as for any call that lacks an argument: the handler's code is
            # wrong, not its caller's payload, so it is no 400 validation error (the caller
            # could not fix it) but a bug, answered 500 and failing a job with this text.
            # The default of None only serves skip_optimistic_lock=True.
            raise TypeError(
                f"update() of {self.entity_def.key} needs version=<the row's current "
                "version>: pass the version of the row the handler read (row['version']), "
                "so a change made since is a version conflict, or skip_optimistic_lock=True "
                "to write over it"
            )
        model = self.entity_def.entity.changes_model()
        values = validated_values(model, dict(changes), self._handler_qn)
        given = dict(values)
        row = self._load_live(id, for_update=True)
        if not skip_optimistic_lock and version != row["version"]:
            raise VersionConflictError(
                stream_id=str(row["id"]), expected_version=version, current_version=row["version"]
            )
        values = run_pre_save(
            self._env.registry, self.entity_def, values, row, is_new=False, model=model
        )
        run_validate(
            self._env.registry, self.entity_def, self._handler_qn, values, row, is_new=False
        )
        self._check_field_rules(values)
        self._check_write_gates("update", values)
        self._check_transitions(row, values)
        self._check_field_writes("update", given, frozenset(given))
        self._check_references(values)
        attachments = self._check_files(str(row["id"]), values, row)
        return self._record(  # type: ignore[return-value]
            str(row["id"]),
            row["version"],
            "updated",
            self._sealed("changes", str(row["id"]), values, row),
            may_conflict=not self._unique_fields.isdisjoint(values),
            attachments=attachments,
        )

    def delete(self, id: uuid.UUID | str) -> Row:
        """Soft-delete the row, or hard-delete it when the entity has no soft delete."""
        self._check_shared("delete")
        hard = not self.entity_def.entity.soft_delete
        if hard:
            gates.check_irreversible(self._request, "delete", entity=self.entity_def.key)
        row = self._load_live(id, for_update=True)
        row_retention.check_delete_allowed(self.entity_def, row, "delete")
        references.check_delete_allowed(
            self._conn,
            self._env.tables,
            self._env.registry,
            self.entity_def,
            self._row_tenant,
            row["id"],
        )
        for hook in self._env.registry.hooks("pre_delete", self.entity_def.key):
            hook(dict(row), self)
        projected = self._record(str(row["id"]), row["version"], "deleted", {"hard": hard})
        if (
            hard
            and files.delete_row_files(
                self._conn, self._env.tables, self._row_tenant, self.entity_def, str(row["id"])
            )
            and self._request is not None
        ):
            # Gone with the row: their content is deleted after the commit.
            self._request.files_forgotten.append(str(row["id"]))
        for hook in self._env.registry.hooks("post_delete", self.entity_def.key):
            hook(dict(projected or row), self)
        return projected or {"id": row["id"], "version": row["version"] + 1, "deleted": True}

    def restore(self, id: uuid.UUID | str) -> Row:
        """Undo a soft delete."""
        self._check_shared("restore")
        if not self.entity_def.entity.soft_delete:
            raise UnprocessableError(
                error=f"{self.entity_def.key} has no soft delete to restore from"
            )
        row = self._load(id, include_deleted=True, for_update=True)
        if not row["is_deleted"]:
            raise ConflictError(
                Reasons.ENTITY_NOT_DELETED, entity=self.entity_def.key, id=str(row["id"])
            )
        # A restored row refers again: what it refers to must still be there.
        self._check_references(row)
        return self._record(str(row["id"]), row["version"], "restored", {})  # type: ignore[return-value]

    def forget(self, id: uuid.UUID | str) -> Row:
        """Delete the row and destroy its data key: every personal value of the row (its
        subject), in its events, job rows and results, reads as ``FORGOTTEN`` from now on.
        Appends a ``forgotten`` event; no stored event changes. Irreversible."""
        # Before the row is read, so a missing id answers 403 too (``erasure`` checks again).
        self._check_shared("forget")
        gates.check_irreversible(self._request, "forget", entity=self.entity_def.key)
        row = self._load(id, include_deleted=True, for_update=True)
        # Forget removes the row as a delete does: a row retention still keeps stays.
        row_retention.check_delete_allowed(self.entity_def, row, "forget")
        stream_id = self._destroy_key(row, "forgot")
        self._record(stream_id, row["version"], "forgotten", {})
        return {"id": row["id"], "version": row["version"] + 1, "forgotten": True}

    def anonymize(self, id: uuid.UUID | str) -> Row:
        """Forget the row's own personal values and keep the row: the data key of its
        subject (the row) is destroyed, so its ``personal="self"`` values, in the row, its
        events, job rows and results, read ``FORGOTTEN`` from now on; the row, its other
        values and its version stay, and no event is appended here (the caller records
        why). What ``Retention(strategy="anonymize")`` does to old rows. Irreversible."""
        # Before the row is read, as forget (``erasure`` checks again).
        self._check_shared("anonymize")
        gates.check_irreversible(self._request, "forget", entity=self.entity_def.key)
        row = self._load(id, include_deleted=True, for_update=True)
        self._destroy_key(row, "anonymized")
        return {"id": row["id"], "version": row["version"], "anonymized": True}

    def _destroy_key(self, row: Row, done: str) -> str:
        """Destroy the data key of the row's subject (the row itself), recording that the
        handler ``done`` it; returns the row's stream id."""
        stream_id = str(row["id"])
        erasure.forget_subject(
            self._write_request,
            self._env.personal,
            tenant_id=self._row_tenant,
            subject=stream_id,
            by=self._user.id,
            reason=f"{self._handler_qn} {done} {self.entity_def.key} {stream_id}",
            entity=self.entity_def.key,
        )
        return stream_id

    def _load(self, id: uuid.UUID | str, *, include_deleted: bool, for_update: bool = False) -> Row:
        query = self._scoped(select(self._table), "write")
        query = query.where(self._table.c.id == self._parse_id(id))
        if for_update:
            query = query.with_for_update()
        found = self._conn.execute(query).mappings().first()
        row = None if found is None else self._reveal([dict(found)])[0]
        # Another's row answers as a missing one: "not yours" would disclose that it exists.
        if row is None or not self._owns(row, "write"):
            raise NotFoundError(Reasons.ENTITY_NOT_FOUND, entity=self.entity_def.key, id=str(id))
        if not include_deleted and self.entity_def.entity.soft_delete and row["is_deleted"]:
            raise ConflictError(Reasons.ENTITY_DELETED, entity=self.entity_def.key, id=str(id))
        return row

    def _load_live(self, id: uuid.UUID | str, for_update: bool = False) -> Row:
        return self._load(id, include_deleted=False, for_update=for_update)

    # -- steps ------------------------------------------------------------------------------

    @functools.cached_property
    def _unique_fields(self) -> frozenset[str]:
        return frozenset(name for index in self.entity_def.entity.unique for name in index)

    def _sealed(
        self, key: str, stream_id: str, values: Mapping[str, Any], current: Row | None
    ) -> dict[str, Any]:
        """The event payload of ``values`` under ``key``, personal values sealed."""
        encoded = encode_values(values)
        if self.entity_def.entity.personal_fields.isdisjoint(encoded):
            return {key: encoded}
        return {
            key: personal_entities.seal_entity_values(
                self._vault, self.entity_def, self._row_tenant, stream_id, encoded, current
            )
        }

    @functools.cached_property
    def _moves_freely(self) -> bool:
        handler = self._env.registry.find_handler(self._handler_qn)
        return handler is not None and handler.skip_transition_guard is not None

    def _check_transitions(self, previous: Row | None, values: Mapping[str, Any]) -> None:
        """The entity's declared transitions, before the event is appended; skipped for a
        handler that declares ``skip_transition_guard``."""
        transitions = self.entity_def.entity.transitions
        if transitions and not self._moves_freely:
            check_move(self.entity_def.key, transitions, previous, values)

    def _check_field_rules(self, values: Mapping[str, Any]) -> None:
        """The fields' format=, min=/max= and min_items=/max_items= (see ``field_rules``)."""
        if bounded_fields(self.entity_def.entity):
            check_values(self.entity_def.key, self.entity_def.entity.fields, values)

    def _check_references(self, values: Mapping[str, Any]) -> None:
        """Written references name live rows of the tenant (see ``service.references``)."""
        references.check_references_exist(
            self._conn,
            self._env.tables,
            self._env.registry,
            self.entity_def,
            self._row_tenant,
            values,
        )

    def _check_files(
        self, row_id: str, values: Mapping[str, Any], current: Row | None = None
    ) -> list[files.Attachment]:
        """Written file ids name live files of the tenant that the fields take (see
        ``service.files``); the files the row is to hold once its event is appended."""
        if not self._has_files:
            return []
        return files.check_file_fields(
            self._conn, self._env.tables, self.entity_def, self._row_tenant, row_id, values, current
        )

    def _check_shared(self, verb: str) -> None:
        """A shared entity's rows are written by a system-scope feature only (first, before
        anything is read or validated)."""
        gates.check_shared_write(self._env.registry, self.entity_def, self._handler_qn, verb)

    def _check_write_gates(self, verb: str, values: Mapping[str, Any]) -> None:
        gates.check_public_intake(
            self._request,
            self.entity_def.entity.personal_fields,
            values.keys(),
            entity=self.entity_def.key,
        )
        gates.check_instruction_fields(self._request, self.entity_def, verb, values.keys())

    def _check_field_writes(
        self, verb: str, given: Mapping[str, Any], written: frozenset[str]
    ) -> None:
        """The caller's own data (``given``: not defaults or hook values) writes only fields
        it may write (``written``: what it sent), and an owner field only as its own."""
        field_access.check_writable(self.entity_def, self._user, written, verb, self._handler_qn)
        owner = self._owner_rule("write")
        if owner is not None:
            ownership.check_owner_kept(
                owner, self.entity_def, given, self._user, verb, self._handler_qn
            )

    def _record(
        self,
        stream_id: str,
        expected: int,
        verb: str,
        payload: dict[str, Any],
        *,
        may_conflict: bool = False,
        attachments: list[files.Attachment] | None = None,
    ) -> Row | None:
        """Append the verb's event and project it onto the row: both happen or neither does.

        Only a write that touches a unique index can fail between the two; it runs in a
        savepoint, so the failure leaves the transaction usable (a handler may catch the
        ``ConflictError`` and go on). Other writes pay no savepoint (two round trips).
        """
        if not may_conflict:
            event = self._append(stream_id, expected, verb, payload)
            row = self._project(event)
            apply_declared_projections(self._conn, self._env.registry, event)
        else:
            savepoint = self._conn.begin_nested()
            try:
                event = self._append(stream_id, expected, verb, payload)
                row = self._project(event)
                apply_declared_projections(self._conn, self._env.registry, event)
            except BaseException:
                savepoint.rollback()
                raise
            savepoint.commit()
        if attachments:
            files.attach_files(
                self._conn, self._env.tables, self.entity_def, stream_id, attachments
            )
        if row is not None:
            row = self._reveal([row])[0]
        if self._request is not None:
            self._request.appended.append(event)
        # The one place instruction-field writes are recorded: every row write passes here.
        provenance.record_instruction_write(
            self._conn, self._env.tables, self._request, self._user, self.entity_def, event
        )
        if row is None:
            return None
        for hook in self._env.registry.post_save_hooks(self.entity_def.key):
            hook(row, self)
        return self._shown([row])[0]

    def _append(
        self, stream_id: str, expected: int, verb: str, payload: dict[str, Any]
    ) -> StoredEvent:
        # The key of a row created with personal values goes in with its first event.
        personal = self.entity_def.entity.personal_fields and self._env.personal.encrypts
        try:
            return append_event(
                self._conn,
                self._env.backend,
                self._env.tables,
                tenant_id=self._row_tenant,
                stream_id=stream_id,
                stream_type=self.entity_def.key,
                expected_version=expected,
                type=self.entity_def.event_qn(verb),
                payload=payload,
                metadata=event_metadata(self._request, self._user, self._handler_qn),
                created_by=self._user.id,
                schema_version=self.entity_def.entity.version,
                new_keys=self._vault.take_new_keys() if personal else (),
            )
        except SubjectKeyExists as taken:
            raise ConflictError(
                Reasons.SUBJECT_KEY_EXISTS, entity=self.entity_def.key, id=taken.subject
            ) from None

    def _project(self, event: StoredEvent) -> Row | None:
        try:
            return apply_entity_event(
                self._conn,
                self._env.tables,
                self.entity_def,
                event,
                # Blind indexes are computed from the values this vault has just sealed.
                self._vault if blind_indexed_fields(self.entity_def.entity) else None,
            )
        except exc.IntegrityError as error:
            raise ConflictError(
                Reasons.UNIQUE_VIOLATION, entity=self.entity_def.key, index=_constraint_name(error)
            ) from None


def _constraint_name(error: exc.IntegrityError) -> str:
    diag = getattr(error.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    return str(name) if name else "unique"


def _under(error: AsanohaError, path: str) -> AsanohaError:
    """``error`` of a nested child, its fields named from the parent's payload (``path``:
    ``lines.1``), so the caller sees which child and field it sent wrong."""
    fields = error.details.get("fields")
    if isinstance(fields, list):
        for problem in fields:
            if isinstance(problem, dict) and isinstance(problem.get("path"), str):
                problem["path"] = f"{path}.{problem['path']}"
    if isinstance(error.details.get("field"), str):
        error.details["field"] = f"{path}.{error.details['field']}"
    return error
