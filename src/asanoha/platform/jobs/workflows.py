"""Workflow runs: the run row, its steps' counters, and the job rows of its steps.

A run is a row of ``asanoha_workflow_runs``; each step a row of ``asanoha_workflow_steps``
holding ``remaining`` (steps it comes after that have not succeeded) and ``items_left`` (its
job rows not yet succeeded); each job row of a step a row of ``asanoha_workflow_items`` with
its sealed result. Every transition runs in a transaction of its caller: ``start_run`` in
the starting write's, ``step_ended`` in the one that ends the step's attempt on its job row
(``attempts.JobRows.end``), ``cancel_run`` and ``reopen_run`` in the operator's.

The barrier is a condition in the database: the end of a step's last item decrements each
following step's ``remaining`` with one guarded ``UPDATE ... RETURNING``; the transaction
that reads 0 back starts that step, so a fan-in starts exactly once however its
predecessors' ends race (row locks on Postgres, the one writer on SQLite). The items of a
step count themselves down the same way (``items_left``): on Postgres the success of an
item that is not its step's last is one statement that neither takes the run's row nor
reads anything first (``count_down`` with ``unless_last``, composed by
``attempts_postgres``); the last item's end takes the general path, run row first.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Select,
    Update,
    bindparam,
    exists,
    func,
    insert,
    select,
    update,
)

from asanoha.platform.jobs import clocks
from asanoha.platform.jobs.control import cancel_job_row, finish_held_row, retry_failed_row
from asanoha.platform.jobs.enqueue import sealed, write_outbox
from asanoha.platform.jobs.message import OutboxMessage
from asanoha.platform.jobs.states import CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED
from asanoha.platform.jobs.workflow_events import (
    WORKFLOW_CANCELLED,
    WORKFLOW_FAILED,
    WORKFLOW_STARTED,
    WORKFLOW_STEP,
    WORKFLOW_SUCCEEDED,
    append_run_event,
)
from asanoha.platform.model.canvas import CANVAS_QN, step_payload
from asanoha.platform.model.workflows import StepDef, WorkflowDef, canvas_of_run
from asanoha.platform.personal.vault import reveal
from asanoha.platform.store import Tables

#: A step that waits for the steps it comes after.
WAITING = "waiting"
#: Headers of a step's job row that link it to its run.
RUN_HEADER, STEP_HEADER, ITEM_HEADER = "workflow_run", "workflow_step", "workflow_item"

WorkflowLookup = Callable[[str], WorkflowDef | None]


def in_a_run(headers: Any) -> bool:
    """Whether a job row with ``headers`` runs as a step of a workflow run."""
    return isinstance(headers, Mapping) and RUN_HEADER in headers


def one_of_many(workflow_of: WorkflowLookup, job_qn: str, headers: Mapping[str, Any]) -> bool:
    """Whether the step job row of ``job_qn`` with ``headers`` may share its step with other
    items: ``False`` for a declared step without ``map=`` (one row: its end is its step's),
    ``True`` for a mapped one and for what no declared workflow says (a canvas's step)."""
    step = headers.get(STEP_HEADER)
    if not isinstance(step, str) or not job_qn.endswith(f":{step}"):
        return True
    workflow = workflow_of(job_qn[: -len(step) - 1])
    declared = None if workflow is None else workflow.steps.get(step)
    return declared is None or declared.qn != job_qn or declared.map is not None


class StepMapError(Exception):
    """A step's ``map=`` raised or did not return a list."""


@dataclass(frozen=True)
class MapContext:
    """What a step's ``map=`` reads: the run's payload and the results of earlier steps."""

    run_id: uuid.UUID
    payload: Mapping[str, Any]
    results: Mapping[str, Any]


def start_run(
    conn: Connection,
    tables: Tables,
    workflow: WorkflowDef,
    payload: dict[str, Any],
    headers: dict[str, Any],
    *,
    run_id: uuid.UUID | None = None,
) -> tuple[uuid.UUID, list[OutboxMessage]]:
    """Write a run of ``workflow`` on ``payload`` and its first steps' job rows in
    ``conn``'s transaction. Returns the run's id and the messages to publish after commit."""
    run_id = run_id or uuid.uuid4()
    now = clocks.now()
    conn.execute(
        insert(tables.workflow_runs).values(
            id=run_id,
            workflow_qn=workflow.qn,
            tenant_id=str(headers.get("tenant_id") or ""),
            state=RUNNING,
            payload=sealed(conn, payload),
            headers=headers,
            steps_left=len(workflow.steps),
            created_at=now,
        )
    )
    conn.execute(
        insert(tables.workflow_steps),
        [
            {"run_id": run_id, "step": step.name, "state": WAITING, "remaining": len(step.after)}
            for step in workflow.steps.values()
        ],
    )
    waits = [
        {
            "run_id": run_id,
            "step": step.name,
            "workflow_qn": workflow.qn,
            "tenant_id": str(headers.get("tenant_id") or ""),
            "event_type": step.hold.event,
            "match_key": step.hold.payload_key(payload),
            "created_at": now,
        }
        for step in workflow.waits
        if step.hold is not None
    ]
    if waits:
        conn.execute(insert(tables.workflow_waits), waits)
    append_run_event(conn, tables, run_id, WORKFLOW_STARTED, {"workflow": workflow.qn}, headers)
    run = _Run(run_id, workflow, payload, headers, _only(workflow))
    messages: list[OutboxMessage] = []
    for step in workflow.first_steps:
        messages.extend(_start_step(conn, tables, run, step, publish=True))
    return run_id, messages


def _only(workflow: WorkflowDef) -> WorkflowLookup:
    """A lookup that knows ``workflow`` alone (a run's start has nothing else at hand)."""
    return lambda qn: workflow if qn == workflow.qn else None


def workflow_of_run(
    workflow_of: WorkflowLookup, workflow_qn: str, payload: Callable[[], Any]
) -> WorkflowDef | None:
    """The workflow a run of ``workflow_qn`` follows: a declared one, or a canvas's, which
    its payload holds (``payload()``: the run's payload, revealed)."""
    if workflow_qn == CANVAS_QN:
        return canvas_of_run(payload())
    return workflow_of(workflow_qn)


def step_ended(
    conn: Connection,
    tables: Tables,
    workflow_of: WorkflowLookup,
    row_id: uuid.UUID,
    state: str,
    result: Any,
    error: str | None,
) -> list[OutboxMessage]:
    """The end of an attempt of the step job row ``row_id`` (``state`` pending: another
    attempt follows; succeeded, failed or cancelled), in
    the transaction that ends it: its item's state and result; when it was its step's last
    item, the step's end, which starts each following step whose last predecessor it was.
    Returns the messages of the job rows it placed, for its caller to publish after commit
    (the relay sends them should that fail)."""
    items, runs = tables.workflow_items, tables.workflow_runs
    item = conn.execute(select(items).where(items.c.job_id == row_id)).first()
    if item is None or item.state != PENDING:
        return []
    run_id = uuid.UUID(str(item.run_id))
    # Every transition of a run takes its row first (after the job row an end holds), and
    # a cancel skips the job rows an end holds: so ends and cancels of one run never wait
    # on each other in a circle.
    run_state = conn.execute(
        select(runs.c.state).where(runs.c.id == run_id).with_for_update()
    ).scalar()
    if state == PENDING:
        # Another attempt follows; a run that ended meanwhile (its cancel skipped this row
        # while its attempt was ending) has no use for it.
        if run_state != RUNNING and cancel_job_row(conn, tables, row_id, PENDING) == CANCELLED:
            conn.execute(update(items).where(items.c.job_id == row_id).values(state=CANCELLED))
        return []
    stored = sealed(conn, result) if state == SUCCEEDED else None
    conn.execute(
        item_end(tables),
        {"item_job_id": row_id, "item_state": state, "item_result": stored, "item_error": error},
    )
    if state == FAILED:
        _end_run(conn, tables, run_id, FAILED, error=error, step=item.step, item=item.item)
        return []
    if state == CANCELLED:
        # An operator cancelled the step's job row (``app.jobs.cancel``): the run is
        # cancelled with it, never left running for a step that will not end.
        _end_run(conn, tables, run_id, CANCELLED, step=item.step, item=item.item)
        return []
    if state != SUCCEEDED:
        return []
    counted = count_down(tables, bindparam("count_run_id"), bindparam("count_step"))
    left = conn.execute(counted, {"count_run_id": run_id, "count_step": item.step}).scalar()
    if left != 0:
        return []
    return _step_succeeded(conn, tables, workflow_of, run_id, item.step)


def item_end(tables: Tables, *, after: FromClause | None = None) -> Update:
    """The end of a step's job row on its item, while pending: its ``item_state``,
    ``item_result`` (sealed) and ``item_error`` (bind parameters), for the job row
    ``item_job_id``; returns the item's run and step. ``after``: only when that source (the
    item's count, as a CTE) holds a row."""
    items = tables.workflow_items
    guard: list[ColumnElement[bool]] = [
        items.c.job_id == bindparam("item_job_id", type_=items.c.job_id.type),
        items.c.state == PENDING,
    ]
    if after is not None:
        guard.append(exists(select(1).select_from(after)))
    return (
        update(items)
        .where(*guard)
        .values(
            state=bindparam("item_state", type_=items.c.state.type),
            result=bindparam("item_result", type_=items.c.result.type),
            error=bindparam("item_error", type_=items.c.error.type),
        )
        .returning(items.c.run_id, items.c.step)
    )


def pending_item(tables: Tables, *, after: FromClause) -> Select[Any]:
    """The run and step of the pending item of the job row ``item_job_id`` (a bind
    parameter), its row locked: nothing ends or cancels it before its end's writes. Only
    when ``after`` (the job row's lock, as a CTE) holds a row, and after it: the job row is
    locked before its item, as every end and cancel of a step's row takes them."""
    items = tables.workflow_items
    return (
        select(items.c.run_id, items.c.step)
        .where(
            exists(select(1).select_from(after)),
            items.c.job_id == bindparam("item_job_id", type_=items.c.job_id.type),
            items.c.state == PENDING,
        )
        .with_for_update()
    )


def count_down(
    tables: Tables,
    run_id: ColumnElement[Any],
    step: ColumnElement[Any],
    *,
    unless_last: bool = False,
) -> Update:
    """One item of the running step ``step`` of the run ``run_id`` succeeded: its step's
    ``items_left`` less one, returned. The transaction that reads 0 back ends the step.

    ``unless_last``: only while other items are left (``items_left > 1``), so that the end
    of an item that is not the last needs no run row lock. Ends serialize on the step's
    row: of two that race for the last two items, the second finds 1 left and counts
    nothing here; it ends through ``step_ended``, which takes the run's row first."""
    steps = tables.workflow_steps
    guard = [steps.c.run_id == run_id, steps.c.step == step, steps.c.state == RUNNING]
    if unless_last:
        guard.append(steps.c.items_left > 1)
    return (
        update(steps)
        .where(*guard)
        .values(items_left=steps.c.items_left - 1)
        .returning(steps.c.items_left)
    )


def job_row_cancelled(conn: Connection, tables: Tables, job_id: uuid.UUID) -> None:
    """The pending job row ``job_id`` was cancelled (``control.cancel_job_row``), in
    ``conn``'s transaction: when it is a step's, its run is cancelled with it."""
    items = tables.workflow_items
    found = conn.execute(
        select(items.c.run_id).where(items.c.job_id == job_id, items.c.state == PENDING)
    ).scalar()
    if found is not None:
        _end_run(conn, tables, uuid.UUID(str(found)), CANCELLED)


def cancel_run(conn: Connection, tables: Tables, run_id: uuid.UUID) -> bool:
    """Cancel the running run ``run_id``: its pending step rows at once, its running ones
    through ``ctx.cancel_requested``. Returns whether it was running."""
    return _end_run(conn, tables, run_id, CANCELLED)


@dataclass(frozen=True)
class Reopened:
    """What ``reopen_run`` did: ``state`` the run's state it found, ``busy`` a step job row
    still running (the run is not reopened while one is), ``messages`` the job rows to
    publish after commit."""

    state: str | None
    busy: bool = False
    messages: list[OutboxMessage] = field(default_factory=list)


def reopen_run(
    conn: Connection,
    tables: Tables,
    workflow_of: WorkflowLookup,
    run_id: uuid.UUID,
    *,
    by_broker: bool,
) -> Reopened:
    """Run the failed run ``run_id`` again from where it stopped: each step its failure
    failed or cancelled runs again its items that did not succeed (their job rows back to
    pending with their full attempt budget), a step that had not started waits again, and
    what succeeded stays done. Nothing changes unless the run is failed and no job row of
    it still runs (an attempt its failure asked to stop has not ended yet)."""
    runs, steps, items, outbox = (
        tables.workflow_runs,
        tables.workflow_steps,
        tables.workflow_items,
        tables.outbox,
    )
    found = conn.execute(
        select(runs.c.state, runs.c.workflow_qn).where(runs.c.id == run_id).with_for_update()
    ).first()
    state = None if found is None else found.state
    if state != FAILED:
        return Reopened(None if state is None else str(state))
    # A canvas has no held steps: only a declared workflow's steps may wait.
    declared = workflow_of(str(found.workflow_qn)) if found is not None else None
    if conn.execute(
        select(items.c.job_id).where(items.c.run_id == run_id, items.c.state == PENDING).limit(1)
    ).first():
        return Reopened(FAILED, busy=True)
    now = clocks.now()
    conn.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(state=RUNNING, error=None, failed_step=None, failed_item=None, finished_at=None)
    )
    stopped = (
        conn.execute(
            select(steps.c.step).where(
                steps.c.run_id == run_id, steps.c.state.in_((FAILED, CANCELLED))
            )
        )
        .scalars()
        .all()
    )
    messages: list[OutboxMessage] = []
    finished: list[str] = []
    for name in stopped:
        again = conn.execute(
            select(items.c.job_id, outbox.c.job_qn)
            .join(outbox, outbox.c.id == items.c.job_id)
            .where(
                items.c.run_id == run_id,
                items.c.step == name,
                items.c.state.in_((FAILED, CANCELLED)),
            )
            .order_by(items.c.item)
        ).all()
        started = conn.execute(
            select(func.count()).where(items.c.run_id == run_id, items.c.step == name)
        ).scalar_one()
        if not started:
            conn.execute(
                update(steps)
                .where(steps.c.run_id == run_id, steps.c.step == name)
                .values(state=WAITING)
            )
            continue
        # Counted again: an item that succeeded after the run had failed was not counted.
        conn.execute(
            update(steps)
            .where(steps.c.run_id == run_id, steps.c.step == name)
            .values(state=RUNNING, items_left=len(again))
        )
        step = None if declared is None else declared.steps.get(name)
        hold = None if step is None else step.hold
        for row in again:
            job_id = uuid.UUID(str(row.job_id))
            # A wait or an approval waits again for its whole time; any other step runs now.
            at = now if hold is None else now + dt.timedelta(seconds=hold.held_for)
            retry_failed_row(
                conn,
                tables,
                job_id,
                by_broker=by_broker and hold is None,
                at=at,
                states=(FAILED, CANCELLED),
            )
            conn.execute(
                update(items)
                .where(items.c.job_id == job_id)
                .values(state=PENDING, error=None, result=None)
            )
            if hold is None:
                messages.append(OutboxMessage(id=job_id, job_qn=str(row.job_qn), attempt=1))
        if hold is not None and hold.kind == "wait" and again:
            # Its event came after all (the timeout had won the race): it ends at once.
            matched = _matched_event(conn, tables, run_id, name)
            if matched is not None:
                messages.extend(
                    resolve_held(conn, tables, workflow_of, run_id, name, matched) or []
                )
        if not again:
            finished.append(name)
    for name in finished:
        messages.extend(_step_succeeded(conn, tables, workflow_of, run_id, name))
    return Reopened(FAILED, messages=messages)


def results_of(
    conn: Connection, tables: Tables, workflow: WorkflowDef, run_id: uuid.UUID, names: Sequence[str]
) -> dict[str, Any]:
    """The stored (sealed) results of the steps ``names`` that succeeded: a mapped step's as
    the list of its items' results, in item order."""
    items = tables.workflow_items
    rows = conn.execute(
        select(items.c.step, items.c.item, items.c.result)
        .where(items.c.run_id == run_id, items.c.step.in_(list(names)))
        .order_by(items.c.step, items.c.item)
    ).all()
    by_step: dict[str, list[Any]] = {}
    for row in rows:
        by_step.setdefault(row.step, []).append(row.result)
    found: dict[str, Any] = {}
    for name in names:
        step = workflow.steps.get(name)
        if step is None:
            continue
        values = by_step.get(name, [])
        found[name] = values if step.map is not None else (values[0] if values else None)
    return found


def resolve_held(
    conn: Connection,
    tables: Tables,
    workflow_of: WorkflowLookup,
    run_id: uuid.UUID,
    step: str,
    result: Any,
) -> list[OutboxMessage] | None:
    """End the held step ``step`` (a wait, an approval) of the run ``run_id`` as succeeded
    with ``result``, in ``conn``'s transaction, when the run reached it: its job row,
    pending, ends without running, and the steps after it start. Returns the messages to
    publish after commit; ``None`` when the step does not wait now (not reached yet, ended,
    or its timeout's attempt runs)."""
    items = tables.workflow_items
    job_id = conn.execute(
        select(items.c.job_id).where(
            items.c.run_id == run_id, items.c.step == step, items.c.state == PENDING
        )
    ).scalar()
    if job_id is None:
        return None
    row_id = uuid.UUID(str(job_id))
    if not finish_held_row(conn, tables, row_id):
        return None
    return step_ended(conn, tables, workflow_of, row_id, SUCCEEDED, result, None)


def _matched_event(conn: Connection, tables: Tables, run_id: uuid.UUID, step: str) -> Any:
    """The result a wait's matching event made (``None``: none matched yet), revealed."""
    waits = tables.workflow_waits
    row = conn.execute(
        select(waits.c.event_id, waits.c.event).where(
            waits.c.run_id == run_id, waits.c.step == step
        )
    ).first()
    if row is None or row.event_id is None:
        return None
    return reveal(conn, row.event)


def step_state(conn: Connection, tables: Tables, run_id: uuid.UUID, step: str) -> str | None:
    """The state of the step ``step`` of the run ``run_id`` (``None``: no such step)."""
    steps = tables.workflow_steps
    found = conn.execute(
        select(steps.c.state).where(steps.c.run_id == run_id, steps.c.step == step)
    ).scalar()
    return None if found is None else str(found)


def lock_running_run(conn: Connection, tables: Tables, run_id: uuid.UUID) -> str | None:
    """Take the run's row, as every transition of a run does first; its state when it is
    running (``None``: it is not)."""
    runs = tables.workflow_runs
    state = conn.execute(select(runs.c.state).where(runs.c.id == run_id).with_for_update()).scalar()
    return str(state) if state == RUNNING else None


@dataclass
class _Run:
    id: uuid.UUID
    workflow: WorkflowDef
    payload: dict[str, Any]
    headers: dict[str, Any]
    #: How the run's workflow is found again (a held step that ends at once needs it).
    workflow_of: WorkflowLookup
    #: Results read so far (revealed), by step.
    results: dict[str, Any] = field(default_factory=dict)


def _step_succeeded(
    conn: Connection, tables: Tables, workflow_of: WorkflowLookup, run_id: uuid.UUID, name: str
) -> list[OutboxMessage]:
    steps, runs = tables.workflow_steps, tables.workflow_runs
    conn.execute(
        update(steps)
        .where(steps.c.run_id == run_id, steps.c.step == name, steps.c.state == RUNNING)
        .values(state=SUCCEEDED)
    )
    row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
    if row is None or row.state != RUNNING:
        return []
    payload = reveal(conn, row.payload)
    workflow = workflow_of_run(workflow_of, row.workflow_qn, lambda: payload)
    if workflow is None:
        _end_run(conn, tables, run_id, FAILED, error=f"{row.workflow_qn} is not declared")
        return []
    run = _Run(run_id, workflow, payload, dict(row.headers), workflow_of)
    step_event = {"workflow": workflow.qn, "step": name, "state": SUCCEEDED}
    append_run_event(conn, tables, run_id, WORKFLOW_STEP, step_event, run.headers)
    left = conn.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.state == RUNNING)
        .values(steps_left=runs.c.steps_left - 1)
        .returning(runs.c.steps_left)
    ).scalar()
    if left == 0:
        result = results_of(conn, tables, workflow, run_id, [name])[name]
        conn.execute(
            update(runs)
            .where(runs.c.id == run_id, runs.c.state == RUNNING)
            .values(state=SUCCEEDED, result=result, finished_at=clocks.now())
        )
        ended = {"workflow": workflow.qn, "state": SUCCEEDED}
        append_run_event(conn, tables, run_id, WORKFLOW_SUCCEEDED, ended, run.headers)
        return []
    messages: list[OutboxMessage] = []
    for following in workflow.successors(name):
        remaining = conn.execute(
            update(steps)
            .where(
                steps.c.run_id == run_id,
                steps.c.step == following.name,
                steps.c.remaining > 0,
            )
            .values(remaining=steps.c.remaining - 1)
            .returning(steps.c.remaining)
        ).scalar()
        if remaining == 0:
            messages.extend(_start_step(conn, tables, run, following, publish=True))
            if _run_state(conn, tables, run_id) != RUNNING:
                return []
    return messages


def _start_step(
    conn: Connection, tables: Tables, run: _Run, step: StepDef, *, publish: bool
) -> list[OutboxMessage]:
    """Write the job rows of ``step`` (one per item of a mapped step); the messages.

    A mapped step with no item succeeds at once (its result: the empty list)."""
    steps, items_table = tables.workflow_steps, tables.workflow_items
    if step.canvas is not None:
        results = _results(conn, tables, run, step.after)
        payloads: list[dict[str, Any]] = [
            step_payload(step.canvas, [results[name] for name in step.after])
        ]
    elif step.map is None:
        payloads = [run.payload]
    else:
        try:
            items = _items_of(conn, tables, run, step)
        except StepMapError as exc:
            _end_run(conn, tables, run.id, FAILED, error=str(exc), step=step.name)
            return []
        payloads = [{"item": item} for item in items]
    conn.execute(
        update(steps)
        .where(steps.c.run_id == run.id, steps.c.step == step.name)
        .values(state=RUNNING, items_left=len(payloads))
    )
    if not payloads:
        conn.execute(
            update(steps)
            .where(steps.c.run_id == run.id, steps.c.step == step.name)
            .values(state=SUCCEEDED)
        )
        return []
    # A sleep waits in the database, not in the broker; so does a held step, until its
    # timeout (or for ever), unless what it waits for ends it first.
    countdown = step.hold.held_for if step.hold is not None else (step.sleep or 0.0)
    messages = [
        OutboxMessage(
            id=uuid.uuid4(),
            job_qn=step.qn,
            payload=payload,
            headers={
                **run.headers,
                RUN_HEADER: str(run.id),
                STEP_HEADER: step.name,
                ITEM_HEADER: index,
            },
            countdown=countdown,
            by_broker=publish and countdown <= 0,
        )
        for index, payload in enumerate(payloads)
    ]
    write_outbox(conn, tables, messages)
    conn.execute(
        insert(items_table),
        [
            {
                "run_id": run.id,
                "step": step.name,
                "item": index,
                "job_id": message.id,
                "state": PENDING,
            }
            for index, message in enumerate(messages)
        ],
    )
    published = [message for message in messages if message.by_broker]
    if step.hold is not None and step.hold.kind == "wait":
        # Its event may have come before the run reached it: the wait's row says so.
        matched = _matched_event(conn, tables, run.id, step.name)
        if matched is not None:
            resolved = resolve_held(conn, tables, run.workflow_of, run.id, step.name, matched)
            published.extend(resolved or [])
    return published


def _results(conn: Connection, tables: Tables, run: _Run, names: Sequence[str]) -> dict[str, Any]:
    """The results (revealed) of the run's steps ``names``, read once per transition."""
    missing = [name for name in names if name not in run.results]
    if missing:
        stored = results_of(conn, tables, run.workflow, run.id, missing)
        run.results.update(reveal(conn, stored))
    return {name: run.results.get(name) for name in names}


def _items_of(conn: Connection, tables: Tables, run: _Run, step: StepDef) -> list[Any]:
    earlier = run.workflow.earlier(step.name)
    context = MapContext(run.id, run.payload, _results(conn, tables, run, earlier))
    assert step.map is not None
    try:
        items = step.map(context)
    except Exception as exc:
        raise StepMapError(f"map= of step {step.qn} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(items, list | tuple):
        raise StepMapError(f"map= of step {step.qn} must return a list, not {type(items).__name__}")
    return list(items)


def _run_state(conn: Connection, tables: Tables, run_id: uuid.UUID) -> str | None:
    runs = tables.workflow_runs
    found = conn.execute(select(runs.c.state).where(runs.c.id == run_id)).scalar()
    return None if found is None else str(found)


def _end_run(
    conn: Connection,
    tables: Tables,
    run_id: uuid.UUID,
    state: str,
    *,
    error: str | None = None,
    step: str | None = None,
    item: int | None = None,
) -> bool:
    """End the running run as ``state`` (failed or cancelled): its unfinished steps and
    their job rows are cancelled. Returns whether it was running."""
    runs, steps, items = tables.workflow_runs, tables.workflow_steps, tables.workflow_items
    ended = conn.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.state == RUNNING)
        .values(
            state=state,
            error=error,
            failed_step=step,
            failed_item=item,
            finished_at=clocks.now(),
        )
    ).rowcount
    if not ended:
        return False
    run = conn.execute(select(runs.c.workflow_qn, runs.c.headers).where(runs.c.id == run_id)).one()
    told = {"workflow": run.workflow_qn, "state": state, "step": step, "item": item, "error": error}
    event_type = WORKFLOW_FAILED if state == FAILED else WORKFLOW_CANCELLED
    append_run_event(conn, tables, run_id, event_type, told, dict(run.headers))
    if step is not None and state == FAILED:
        conn.execute(
            update(steps).where(steps.c.run_id == run_id, steps.c.step == step).values(state=FAILED)
        )
    conn.execute(
        update(steps)
        .where(steps.c.run_id == run_id, steps.c.state.in_((WAITING, RUNNING)))
        .values(state=CANCELLED)
    )
    outbox = tables.outbox
    open_rows = conn.execute(
        select(items.c.job_id, outbox.c.state)
        .join(outbox, outbox.c.id == items.c.job_id)
        .where(items.c.run_id == run_id, items.c.state == PENDING)
        # A row an attempt's end holds is skipped: that end sees the run ended (above).
        .with_for_update(of=outbox, skip_locked=True)
    ).all()
    for row in open_rows:
        job_id = uuid.UUID(str(row.job_id))
        if cancel_job_row(conn, tables, job_id, row.state) == CANCELLED:
            conn.execute(
                update(items)
                .where(items.c.job_id == job_id, items.c.state == PENDING)
                .values(state=CANCELLED)
            )
    return True
