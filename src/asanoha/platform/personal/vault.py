"""``PersonalData`` (the service's keys and policy) and the ``Vault`` of one transaction.

A vault holds the data keys its transaction opened (never longer: a subject forgotten by
another process must not stay readable from a cache) and the values it sealed or opened, so
that a job payload, a stored result or an idempotent outcome written in the same transaction
holds the same ciphertext as the event (``seal_known``). Keys made inside a savepoint that
rolls back are dropped from it.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Connection, Engine, event

from asanoha.platform.model.entity import Entity
from asanoha.platform.personal import cipher, redaction, subject_keys
from asanoha.platform.personal.blind_index import blind_column, blind_hash, blind_indexed_fields
from asanoha.platform.personal.master_keys import KeyWrapper
from asanoha.platform.personal.sentinel import FORGOTTEN, FORGOTTEN_TEXT
from asanoha.platform.store.backends import Backend
from asanoha.platform.store.tables import Tables

#: The blind index key of plaintext mode (no master key): development only.
_PLAINTEXT_INDEX_KEY = b"\x00" * 32
#: Strings this long are recognised by value anywhere in a stored JSON document; shorter
#: ones (and other values) only under their field's name.
_MIN_MATCHED_TEXT = 4

KeyRef = tuple[str, str]
#: Values a job was given opened (outside any transaction), with their sealed text: what the
#: job writes on in transactions of its own stores the same ciphertext. Per thread; bounded.
_CARRIED: ContextVar[tuple[dict[str, str], dict[tuple[str, str], str]] | None] = ContextVar(
    "asanoha_personal_carried", default=None
)
_MAX_CARRIED = 1000


def carried() -> tuple[dict[str, str], dict[tuple[str, str], str]] | None:
    """The values this context's vaults carry (see ``_CARRIED``)."""
    return _CARRIED.get()


def carry(values: tuple[dict[str, str], dict[tuple[str, str], str]] | None) -> None:
    """Let this context's vaults carry ``values`` (from ``carried`` of another context: a job
    runs in a context of its own)."""
    _CARRIED.set(values)


class PersonalData:
    """How the service stores personal values: sealed under wrapped data keys, or (without a
    master key, development only) as they are."""

    def __init__(self, wrapper: KeyWrapper | None, tables: Tables, backend: Backend) -> None:
        self.wrapper = wrapper
        self.tables = tables
        self.backend = backend
        # Index keys are never destroyed: kept for the process once read from the database.
        self._index_keys: dict[str, bytes] = {}
        self._vaults: weakref.WeakKeyDictionary[Connection, Vault] = weakref.WeakKeyDictionary()
        self._engines: weakref.WeakSet[Engine] = weakref.WeakSet()

    @property
    def encrypts(self) -> bool:
        """Whether values are sealed (a master key is configured)."""
        return self.wrapper is not None

    def vault(self, conn: Connection) -> Vault:
        """The vault of ``conn``'s current transaction."""
        transaction = conn.get_transaction()
        found = self._vaults.get(conn)
        if found is not None and found.transaction is transaction and transaction is not None:
            return found
        self._watch(conn.engine)
        made = Vault(self, conn, transaction)
        self._vaults[conn] = made
        return made

    def _watch(self, engine: Engine) -> None:
        if engine in self._engines:
            return
        self._engines.add(engine)
        event.listen(engine, "rollback_savepoint", self._savepoint_rolled_back)

    def _savepoint_rolled_back(self, conn: Connection, name: Any, context: Any) -> None:
        found = self._vaults.get(conn)
        if found is not None:
            found.drop_created()

    def reveal_detached(self, engine: Engine, value: Any) -> Any:
        """``value`` with its sealed values opened, through a connection of its own (opened
        only when ``value`` holds one): for a job's payload and trigger result."""
        found: list[cipher.Sealed] = []
        _collect(value, found, {})
        if not found or not self.encrypts:
            return value
        with engine.connect() as conn:
            vault = self.vault(conn)
            opened = vault.reveal(value)
        vault.carry()
        return opened

    def index_key(self, vault: Vault, tenant_id: str) -> bytes:
        """The tenant's blind index key (made on first use)."""
        if self.wrapper is None:
            return _PLAINTEXT_INDEX_KEY
        known = self._index_keys.get(tenant_id)
        if known is not None:
            return known
        ref = (tenant_id, subject_keys.INDEX_SUBJECT)
        loaded = subject_keys.load(vault.conn, self.tables, self.wrapper, [ref]).get(ref)
        if loaded is not None:
            self._index_keys[tenant_id] = loaded
            return loaded
        made = vault.data_key(tenant_id, subject_keys.INDEX_SUBJECT)
        if made is None:  # pragma: no cover - an index key is never destroyed
            raise RuntimeError(f"the blind index key of tenant {tenant_id!r} is gone")
        return made


#: The ``PersonalData`` of each engine: code that holds only a connection (the outbox, the
#: idempotency store) seals and opens through it.
_BY_ENGINE: weakref.WeakKeyDictionary[Engine, PersonalData] = weakref.WeakKeyDictionary()


def attach(personal: PersonalData, engine: Engine) -> None:
    """Make ``personal`` the one of ``engine``'s connections (see ``seal_known``, ``reveal``)."""
    _BY_ENGINE[engine] = personal


def attach_like(engine: Engine, like: Engine) -> None:
    """Give ``engine``'s connections the ``PersonalData`` of ``like``'s (another engine on
    the same database, with options of its own), if it has one."""
    personal = _BY_ENGINE.get(like)
    if personal is not None:
        attach(personal, engine)


def seal_known(conn: Connection, value: Any) -> Any:
    """``value`` (JSON about to be stored through ``conn``) with every personal value its
    transaction sealed or opened replaced by the same sealed text."""
    personal = _BY_ENGINE.get(conn.engine)
    if personal is None or not personal.encrypts:
        return value
    return personal.vault(conn).seal_known(value)


def seal_carried(engine: Engine, value: Any) -> Any:
    """``value`` (JSON about to be stored through ``engine`` in a transaction that seals and
    opens nothing of its own) with every personal value this context carries replaced by
    its sealed text: what ``seal_known`` does in such a transaction, without one."""
    personal = _BY_ENGINE.get(engine)
    carried = _CARRIED.get()
    if personal is None or not personal.encrypts or carried is None or not carried[1]:
        return value
    return _replace_known(value, None, carried[0], carried[1])


def reveal(conn: Connection, value: Any) -> Any:
    """``value`` (JSON read through ``conn``) with its sealed values opened."""
    personal = _BY_ENGINE.get(conn.engine)
    if personal is None or not personal.encrypts:
        return value
    return personal.vault(conn).reveal(value)


def vault_of(conn: Connection) -> Vault | None:
    """The vault of ``conn``'s transaction (``None``: its engine stores no personal data)."""
    personal = _BY_ENGINE.get(conn.engine)
    return None if personal is None else personal.vault(conn)


class Vault:
    """The keys and sealed values of one transaction."""

    def __init__(self, data: PersonalData, conn: Connection, transaction: Any) -> None:
        self.data = data
        self.conn = conn
        self.transaction = transaction
        self._keys: dict[KeyRef, bytes | None] = {}
        self._ciphers: dict[KeyRef, AESGCM | None] = {}
        self._created: set[KeyRef] = set()
        # Rows of keys made for new subjects, not inserted yet: the event that creates the
        # subject's row inserts its key in the same statement (``take_new_keys``).
        self._new_keys: list[dict[str, Any]] = []
        # Subjects read without a key row (never written; their values cannot open).
        self._absent: set[KeyRef] = set()
        # Value seen (sealed or opened) -> its sealed text: by text, and by field name.
        self._by_text: dict[str, str] = {}
        self._by_field: dict[tuple[str, str], str] = {}
        # Sealed text -> its value, for what this vault sealed or opened: a create answers
        # the row it just sealed without parsing and decrypting it again.
        self._opened: dict[str, Any] = {}
        carried = _CARRIED.get()
        if carried is not None:
            self._by_text.update(carried[0])
            self._by_field.update(carried[1])

    def carry(self) -> None:
        """Keep what this vault opened for the vaults this thread makes next (see
        ``_CARRIED``)."""
        carried = _CARRIED.get()
        if carried is None or len(carried[0]) + len(carried[1]) > _MAX_CARRIED:
            carried = ({}, {})
            _CARRIED.set(carried)
        carried[0].update(self._by_text)
        carried[1].update(self._by_field)

    # -- keys -------------------------------------------------------------------------------

    def data_key(
        self, tenant_id: str, subject: str, *, create: bool = True, new: bool = False
    ) -> bytes | None:
        """The subject's data key (made when it has none and ``create``); ``None`` when the
        subject is forgotten (or has no key and ``create`` is false). ``new``: the subject
        most likely has no key yet (a row being created): made without looking first, and its
        row inserted with the row's first event (``take_new_keys``)."""
        ref = (tenant_id, subject)
        if ref in self._keys:
            return self._keys[ref]
        if ref in self._absent and not create:
            return None
        wrapper = self.data.wrapper
        assert wrapper is not None
        if new:
            return self._make_new(ref)
        loaded = subject_keys.load(self.conn, self.data.tables, wrapper, [ref])
        if ref in loaded:
            self._keys[ref] = loaded[ref]
            return loaded[ref]
        if not create:
            self._absent.add(ref)
            return None
        return self._make(ref)

    def _make(self, ref: KeyRef) -> bytes | None:
        wrapper = self.data.wrapper
        assert wrapper is not None
        self._absent.discard(ref)
        made = subject_keys.create(self.conn, self.data.backend, self.data.tables, wrapper, *ref)
        self._keys[ref] = made
        self._created.add(ref)
        return made

    def _make_new(self, ref: KeyRef) -> bytes:
        wrapper = self.data.wrapper
        assert wrapper is not None
        self._absent.discard(ref)
        made, row = subject_keys.new_key(wrapper, *ref)
        self._new_keys.append(row)
        self._keys[ref] = made
        self._created.add(ref)
        return made

    def take_new_keys(self) -> list[dict[str, Any]]:
        """The rows of the keys made for new subjects since the last call, to insert with
        the event that creates them (see ``append_event``)."""
        taken, self._new_keys = self._new_keys, []
        return taken

    def forgotten(self, tenant_id: str, subject: str) -> None:
        """The subject's key was destroyed in this transaction."""
        self._keys[(tenant_id, subject)] = None
        self._ciphers.pop((tenant_id, subject), None)
        self._opened.clear()

    def drop_created(self) -> None:
        """A savepoint rolled back: keys made in it are gone from the database."""
        for ref in self._created:
            self._keys.pop(ref, None)
            self._ciphers.pop(ref, None)
        lost = self._created

        def kept(sealed: str) -> bool:
            parsed = cipher.parse(sealed)
            return parsed is None or parsed.key_ref not in lost

        self._by_text = {k: v for k, v in self._by_text.items() if kept(v)}
        self._by_field = {k: v for k, v in self._by_field.items() if kept(v)}
        self._opened.clear()
        self._new_keys = []
        self._created = set()

    def _cipher(self, ref: KeyRef, *, create: bool, new: bool = False) -> AESGCM | None:
        if ref in self._ciphers:
            return self._ciphers[ref]
        key = self.data_key(*ref, create=create, new=new)
        made = None if key is None else AESGCM(key)
        if ref in self._keys:
            self._ciphers[ref] = made
        return made

    def preload(self, refs: Iterable[KeyRef]) -> None:
        """Read the keys of ``refs`` not yet held, in one query."""
        wanted = {ref for ref in refs if ref not in self._keys and ref not in self._absent}
        if not wanted or self.data.wrapper is None:
            return
        loaded = subject_keys.load(self.conn, self.data.tables, self.data.wrapper, wanted)
        self._keys.update(loaded)
        # A subject without a row has no key: its values cannot open (read as forgotten).
        self._absent.update(wanted - loaded.keys())

    # -- values -----------------------------------------------------------------------------

    def seal(
        self,
        tenant_id: str,
        subject: str,
        scope: str,
        field: str,
        value: Any,
        *,
        new_subject: bool = False,
    ) -> Any:
        """``value`` sealed for the subject (as it is in plaintext mode, or when ``None``);
        ``FORGOTTEN`` for a forgotten subject (nothing about it is stored again).
        ``new_subject``: the subject is a row being created (its key is made at once)."""
        if value is None or self.data.wrapper is None:
            return value
        ref = (tenant_id, subject)
        made = self._cipher(ref, create=True, new=new_subject)
        if made is None:
            return FORGOTTEN
        sealed = cipher.seal(made, tenant_id, subject, scope, field, value)
        self._remember(field, value, sealed)
        self._opened[sealed] = value
        return sealed

    def blind(self, tenant_id: str, scope: str, field: str, value: Any) -> str | None:
        """The blind index of ``value`` (``None`` for ``None``)."""
        if value is None:
            return None
        return blind_hash(self.data.index_key(self, tenant_id), scope, field, value)

    def blind_columns(
        self, entity: Entity, scope: str, tenant_id: str, values: Mapping[str, Any]
    ) -> dict[str, str | None]:
        """The blind index columns of the indexed personal fields in ``values`` (as an
        event's payload holds them, in the newest shape), each from the value opened: an
        index follows the field's current name, and a forgotten value has none."""
        indexed = blind_indexed_fields(entity)
        return {
            blind_column(name): self._blind_of_stored(tenant_id, scope, name, values[name])
            for name in indexed
            if name in values
        }

    def _blind_of_stored(self, tenant_id: str, scope: str, field: str, stored: Any) -> str | None:
        if stored is None or stored is FORGOTTEN or stored == FORGOTTEN_TEXT:
            return None
        if not cipher.is_sealed(stored):
            # Plaintext mode (or a value stored before a master key was set): as it is.
            return self.blind(tenant_id, scope, field, stored)
        if stored in self._opened:
            return self.blind(tenant_id, scope, field, self._opened[stored])
        sealed = cipher.parse(stored)
        made = None
        if sealed is not None and self.data.wrapper is not None:
            made = self._cipher(sealed.key_ref, create=False)
        if sealed is None or made is None:
            return None
        # Not kept in the vault: a rebuild opens every value of a table in one transaction.
        ok, value = cipher.open_sealed(made, sealed)
        return self.blind(tenant_id, scope, field, value) if ok else None

    def prepare(self, value: Any) -> None:
        """Read the keys of every sealed text in ``value`` not yet held, in one query."""
        found: list[cipher.Sealed] = []
        _collect(value, found, self._opened)
        self.preload(sealed.key_ref for sealed in found)

    def reveal(self, value: Any) -> Any:
        """``value`` (any JSON) with every sealed text opened; a forgotten one is
        ``FORGOTTEN``, one that does not open stays as it is."""
        found: list[cipher.Sealed] = []
        # Texts this vault opened already are not parsed again, but opened all the same.
        if not _collect(value, found, self._opened):
            return value
        self.preload(sealed.key_ref for sealed in found)
        return self._open_all(value)

    def open(self, text: str) -> Any:
        """One sealed text opened (keys preloaded or read now)."""
        if text in self._opened:
            value = self._opened[text]
            redaction.note(value)
            return value
        sealed = cipher.parse(text)
        if sealed is None or self.data.wrapper is None:
            return text
        made = self._cipher(sealed.key_ref, create=False)
        if made is None:
            return FORGOTTEN
        ok, value = cipher.open_sealed(made, sealed)
        if not ok:
            return text
        self._remember(sealed.field, value, text)
        self._opened[text] = value
        return value

    def _open_all(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.open(value) if cipher.is_sealed(value) else value
        if isinstance(value, dict):
            return {key: self._open_all(inner) for key, inner in value.items()}
        if isinstance(value, list):
            return [self._open_all(inner) for inner in value]
        return value

    def _remember(self, field: str, value: Any, sealed: str) -> None:
        # Also kept out of the log lines and error texts of the job or consumer at work.
        redaction.note(value)
        if isinstance(value, str) and len(value) >= _MIN_MATCHED_TEXT:
            self._by_text[value] = sealed
        self._by_field[(field, _json(value))] = sealed

    def seal_known(self, value: Any) -> Any:
        """``value`` (JSON about to be stored) with every value this transaction sealed or
        opened replaced by its sealed text."""
        if not self._by_field:
            return value
        return _replace_known(value, None, self._by_text, self._by_field)


def _replace_known(
    value: Any,
    name: str | None,
    by_text: Mapping[str, str],
    by_field: Mapping[tuple[str, str], str],
) -> Any:
    """``value`` with each value known by its text, or (under the field ``name``) by its
    field, replaced by its sealed text."""
    if isinstance(value, dict):
        return {
            key: _replace_known(inner, str(key), by_text, by_field) for key, inner in value.items()
        }
    if isinstance(value, list):
        return [_replace_known(inner, name, by_text, by_field) for inner in value]
    if value is None or value is FORGOTTEN:
        return value
    if isinstance(value, str) and value in by_text:
        return by_text[value]
    if name is not None:
        return by_field.get((name, _json(value)), value)
    return value


def _collect(value: Any, found: list[cipher.Sealed], known: Mapping[str, Any]) -> bool:
    """The sealed texts in ``value`` that are not ``known`` already; whether ``value`` holds
    any sealed text (known or not)."""
    if isinstance(value, str):
        if not cipher.is_sealed(value):
            return False
        if value not in known:
            sealed = cipher.parse(value)
            if sealed is not None:
                found.append(sealed)
        return True
    seen = False
    if isinstance(value, dict):
        for inner in value.values():
            seen = _collect(inner, found, known) or seen
    elif isinstance(value, list):
        for inner in value:
            seen = _collect(inner, found, known) or seen
    return seen


#: Built once: ``json.dumps`` with arguments builds an encoder on every call.
_SORTED = json.JSONEncoder(sort_keys=True, default=str)


def _json(value: Any) -> str:
    try:
        return _SORTED.encode(value)
    except (TypeError, ValueError):
        return repr(value)
