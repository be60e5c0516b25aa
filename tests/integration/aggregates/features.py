"""Fixture features of the aggregate suite: an account folded by a class (with and without
snapshots) and by a fold function, from events of which one moved through two versions;
and a fold of the demo's note entity events, to compare with the note table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, update

from asanoha import (
    Access,
    ConflictError,
    Feature,
    NotFoundError,
    QueryContext,
    StoredEvent,
    UnprocessableError,
    WriteContext,
)
from asanoha.platform.errors import Reasons

ADMIN = Access(roles=["Admin"])
ledger = Feature("ledger")


class Opened(BaseModel):
    owner: str
    email: str


class Deposited(BaseModel):
    """Version 2: cents and a note (version 1: ``units``, whole currency units)."""

    amount: int
    note: str


class Withdrawn(BaseModel):
    amount: int


def cents_from_units(payload: dict[str, Any]) -> dict[str, Any]:
    """1 -> 2: whole units became cents, with an empty note."""
    return {"amount": payload["units"] * 100, "note": ""}


opened = ledger.event("opened", Opened, pii={"owner": "self", "email": "self"})
deposited = ledger.event("deposited", Deposited, version=2, upcasters={1: cents_from_units})
withdrawn = ledger.event("withdrawn", Withdrawn, keep_for="30d")


class Account:
    """An account's state: per-event methods, and ``apply`` for the rest (withdrawals)."""

    def __init__(self) -> None:
        self.owner: str | None = None
        self.email: str | None = None
        self.balance = 0
        self.notes: list[str] = []
        self.events = 0

    def apply_opened(self, event: StoredEvent) -> None:
        self.owner = event.payload["owner"]
        self.email = event.payload["email"]
        self.events += 1

    def apply_deposited(self, event: StoredEvent) -> None:
        self.balance += event.payload["amount"]
        self.notes.append(event.payload["note"])
        self.events += 1

    def apply(self, event: StoredEvent) -> None:
        if event.type == withdrawn.qn:
            self.balance -= event.payload["amount"]
        self.events += 1


ledger.aggregate("account", snapshot_every=5)(Account)
ledger.aggregate("account-unsnapshotted")(Account)


@ledger.aggregate("balance", snapshot_every=3, version=1)
def balance(state: dict[str, Any] | None, event: StoredEvent) -> dict[str, Any]:
    """A fold function: the balance and the owner's e-mail, as JSON."""
    state = dict(state or {"balance": 0, "email": None})
    if event.type == opened.qn:
        state["email"] = event.payload["email"]
    elif event.type == deposited.qn:
        state["balance"] += event.payload["amount"]
    elif event.type == withdrawn.qn:
        state["balance"] -= event.payload["amount"]
    return state


class Open(BaseModel):
    account: str
    owner: str
    email: str


class Move(BaseModel):
    account: str
    amount: int
    note: str = ""


class Read(BaseModel):
    account: str
    aggregate: str = "account"
    as_of: int | None = None


#: Called between ``fetch_for_writing`` and the append of ``withdraw``: a test appends
#: another writer's event there.
BETWEEN: list[Callable[[], None]] = []


@ledger.write_handler("open", access=ADMIN)
def open_account(payload: Open, ctx: WriteContext) -> dict[str, Any]:
    if ctx.fetch_for_writing("account", payload.account) is not None:
        raise ConflictError(Reasons.VERSION_CONFLICT, account=payload.account)
    stored = ctx.append_event(
        opened, {"owner": payload.owner, "email": payload.email}, stream_id=payload.account
    )
    return {"position": stored.id}


@ledger.write_handler("deposit", access=ADMIN)
def deposit(payload: Move, ctx: WriteContext) -> dict[str, Any]:
    stored = ctx.append_event(
        deposited, {"amount": payload.amount, "note": payload.note}, stream_id=payload.account
    )
    if payload.note == "refuse":
        # After the append: the event and its projection rows roll back with the write.
        raise UnprocessableError(Reasons.UNPROCESSABLE, note=payload.note)
    return {"position": stored.id}


@ledger.write_handler("withdraw", access=ADMIN)
def withdraw(payload: Move, ctx: WriteContext) -> dict[str, Any]:
    """Refused past the balance: the balance read is the one the append is checked against."""
    account = ctx.fetch_for_writing("account", payload.account)
    if account is None:
        raise NotFoundError(Reasons.ENTITY_NOT_FOUND, account=payload.account)
    for hook in BETWEEN:
        hook()
    if account.balance < payload.amount:
        raise UnprocessableError(Reasons.UNPROCESSABLE, balance=account.balance)
    stored = ctx.append_event(withdrawn, {"amount": payload.amount}, stream_id=payload.account)
    return {"position": stored.id}


@ledger.write_handler("read", access=ADMIN)
def read(payload: Read, ctx: WriteContext) -> Any:
    state = ctx.load(payload.aggregate, payload.account, as_of=payload.as_of)
    return vars(state) if isinstance(state, Account) else state


@ledger.query_handler("balance", access=ADMIN)
def balance_of(payload: Read, ctx: QueryContext) -> Any:
    """The same load in a query: it reads, it keeps no snapshot."""
    state = ctx.load(payload.aggregate, payload.account, as_of=payload.as_of)
    return vars(state) if isinstance(state, Account) else state


#: Positions of the deposits the audit consumer was given.
AUDITED: list[int] = []


@ledger.consumer("audit", on=[deposited.qn])
def audit(event: StoredEvent, ctx: Any) -> None:
    """A consumer of deposits: pruning waits until it has handled them."""
    AUDITED.append(event.id)


@ledger.job("statement", manual=True)
def statement(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """A job reads an account as ``ctx.load`` gives it."""
    account = ctx.load("account", payload["account"])
    return {"balance": account.balance, "email": account.email}


totals_metadata = MetaData()
account_totals = Table(
    "ledger_account_totals",
    totals_metadata,
    Column("tenant_id", String(64), primary_key=True),
    Column("account", String(64), primary_key=True),
    Column("balance", Integer, nullable=False),
    Column("moves", Integer, nullable=False),
)


@ledger.projection("account-totals", table=account_totals, on=[deposited.qn, withdrawn.qn])
def project_account_totals(event: StoredEvent, target: Any) -> None:
    """Each account's balance and number of moves, kept in the write's transaction."""
    table = target.table
    amount = event.payload["amount"] * (1 if event.type == deposited.qn else -1)
    where = (table.c.tenant_id == event.tenant_id, table.c.account == event.stream_id)
    changed = target.execute(
        update(table)
        .where(*where)
        .values(balance=table.c.balance + amount, moves=table.c.moves + 1)
    )
    if changed.rowcount == 0:
        row = {"tenant_id": event.tenant_id, "account": event.stream_id}
        target.execute(insert(table).values(**row, balance=amount, moves=1))


note_history = Feature("note-history")
NOTE_EVENT = "notes:event:note."


@note_history.aggregate("note")
def note_state(state: dict[str, Any] | None, event: StoredEvent) -> dict[str, Any] | None:
    """The demo's note row, folded from its entity events."""
    verb = event.type.removeprefix(NOTE_EVENT)
    if verb == "created":
        return {**event.payload["data"], "version": event.version, "is_deleted": False}
    assert state is not None
    if verb == "updated":
        return {**state, **event.payload["changes"], "version": event.version}
    if verb in ("deleted", "restored"):
        return {**state, "is_deleted": verb == "deleted", "version": event.version}
    return None if verb == "forgotten" else {**state, "version": event.version}
