"""The write plan of a handler: the ordered steps a call of it meets, decided once.

Every way into a write (an HTTP write, each item of a batch, an MCP tool call, a nested
``ctx.write``/``write_as`` from a handler, job or consumer, a console action, a bundled
handler) runs the plan of the handler it calls. The plan is made the first time the handler
is called in a process (the registry does not change after the ``App`` is built) and says
what applies to *this* handler: a step that cannot apply (no rate limit, no approval for
agents, no triggered job) is left out here, so the hot path decides nothing about it, and
``asanoha explain <qn>`` prints the plan as the dispatcher runs it.

Each step names the module that owns its rule; that module is the only place the rule is
applied. The order (section 3 of the design): admit, rate limit, idempotency, the
transaction, approval, the handler (inside it the entity executor's per-verb steps), enqueue,
commit, the stored outcome, after commit; telemetry and log fields around the whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from asanoha.platform.model import (
    EntityDef,
    HandlerDef,
    JobDef,
    RateLimit,
    Registry,
    instruction_fields,
)
from asanoha.platform.model.agent import resolve_agent_exposure
from asanoha.platform.model.agent_hints import derive_tool_hints
from asanoha.platform.model.field_rules import has_rules
from asanoha.platform.model.workflows import WorkflowDef
from asanoha.platform.service.files import file_fields
from asanoha.platform.service.references import restricting
from asanoha.platform.service.request import EntryHandler


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan: its name, the module that owns its rule, what it does here."""

    name: str
    home: str
    detail: str


@dataclass(frozen=True)
class WritePlan:
    """What a call of ``handler`` meets, in order (see the module's docstring)."""

    handler: HandlerDef
    #: The entry handler a top-level call of it opens (its QN and resolved risk).
    entry: EntryHandler
    #: Whether a call is counted by the rate limiter: the handler declares a limit, or it
    #: did not declare itself unlimited and the application has a default.
    rate_limited: bool
    #: Whether an agent principal's call needs a person's approval (the handler resolves
    #: ``high`` and is exposed to agents).
    approved_for_agents: bool
    #: The jobs a committed call enqueues (in its transaction, through the outbox).
    triggered: tuple[JobDef, ...]
    steps: tuple[PlanStep, ...]
    #: The workflows a committed call starts (their runs in its transaction).
    workflows: tuple[WorkflowDef, ...] = ()

    def describe(self) -> str:
        """The plan as ``asanoha explain <qn>`` prints it: one numbered line per step."""
        lines = [
            f"{self.handler.qn}: write plan (entry risk {self.entry.risk})",
            *(
                f"{number:>2}. {step.name:<18} {step.detail}  [{step.home}]"
                for number, step in enumerate(self.steps, start=1)
            ),
            "    telemetry: a span asanoha.write and the log fields request_id, "
            "correlation_id, tenant, handler around every step  [platform/telemetry.py]",
        ]
        return "\n".join(lines)


def build_write_plan(
    registry: Registry, handler: HandlerDef, default_rate_limit: RateLimit | None
) -> WritePlan:
    """The plan of the write handler ``handler`` in ``registry``; ``default_rate_limit`` is
    the application's ``ASANOHA_RATE_LIMIT_DEFAULT`` (``None``: none)."""
    if handler.kind != "write":
        raise ValueError(f"{handler.qn} is a {handler.kind} handler; only writes have a plan")
    entry = EntryHandler(handler.qn, resolve_agent_exposure(handler).risk)
    declared_unlimited = handler.rate_limit is None and handler.rate_limit_reason is not None
    limit = handler.rate_limit or (None if declared_unlimited else default_rate_limit)
    approved = derive_tool_hints(handler).approval_required
    triggered = registry.jobs_triggered_by(handler.qn)
    workflows = registry.workflows_triggered_by(handler.qn)
    steps: list[PlanStep] = [
        PlanStep(
            "admit",
            "service/dispatch.py",
            f"the caller's roles against {handler.access.describe()}; the payload against "
            f"{handler.payload_model.__name__} (400 with each field's error)",
        )
    ]
    if limit is not None:
        steps.append(
            PlanStep("rate_limit", "service/rate_limits.py", f"{limit.rate} per {limit.per}")
        )
    steps += [
        PlanStep(
            "idempotency",
            "service/idempotency.py",
            "with a key: hold it, answer a kept outcome (same caller, payload and access)",
        ),
        PlanStep(
            "transaction",
            "store/database.py",
            "one per top-level call; a savepoint for a nested one or a batch item",
        ),
    ]
    if approved:
        steps.append(
            PlanStep(
                "approval",
                "service/approvals.py",
                "an agent principal's call runs under a person's approval of this payload",
            )
        )
    home = "model/crud.py" if handler.crud else handler.func.__module__
    steps.append(PlanStep("handler", home, _handler_detail(handler)))
    steps += _executor_steps(registry, handler)
    if triggered:
        steps.append(
            PlanStep(
                "enqueue",
                "platform/jobs/enqueue.py",
                "job rows in the transaction: " + ", ".join(job.qn for job in triggered),
            )
        )
    if workflows:
        steps.append(
            PlanStep(
                "enqueue",
                "platform/jobs/workflows.py",
                "workflow runs in the transaction: " + ", ".join(flow.qn for flow in workflows),
            )
        )
    steps += [
        PlanStep("commit", "store/database.py", "the events, rows, job rows and key together"),
        PlanStep(
            "outcome",
            "service/idempotency.py",
            "with a key: the answer (or a 4xx refusal) kept under it, in the transaction",
        ),
        PlanStep(
            "after_commit",
            "service/after_commit.py",
            "publish the job rows, wake consumers, run after_commit hooks, delete the content "
            "of forgotten files; never fails the call",
        ),
    ]
    return WritePlan(
        handler=handler,
        entry=entry,
        rate_limited=limit is not None,
        approved_for_agents=approved,
        triggered=triggered,
        steps=tuple(steps),
        workflows=workflows,
    )


def _handler_detail(handler: HandlerDef) -> str:
    if handler.crud is not None:
        return f"the standard {handler.crud.verb} of {_crud_entity(handler)}"
    name = getattr(handler.func, "__qualname__", repr(handler.func))
    return f"{name}: its entity writes go through the executor, its events through append_event"


def _crud_entity(handler: HandlerDef) -> str:
    assert handler.crud is not None
    return f"{handler.feature}:{handler.crud.entity}"


def _executor_steps(registry: Registry, handler: HandlerDef) -> list[PlanStep]:
    """The executor's steps for the entity a standard handler writes (a custom handler's
    entities are known only when it runs: every executor verb applies the same steps)."""
    entity_def = registry.find_entity(_crud_entity(handler)) if handler.crud else None
    verb = handler.crud.verb if handler.crud else None
    if entity_def is None or verb in (None, "list", "detail"):
        return [
            PlanStep(
                "executor",
                "service/executor.py",
                "per entity verb: field rules, transitions, field access, references, files, "
                "gates, "
                "sealing and intake, append and project (the entity row, then the declared "
                "projections that follow the event)",
            )
        ]
    steps = _entity_steps(registry, entity_def, str(verb))
    past = {"create": "created", "update": "updated", "delete": "deleted", "restore": "restored"}
    followers = registry.projections_on(entity_def.event_qn(past.get(str(verb), str(verb))))
    if followers:
        steps.append(
            PlanStep(
                "declared_projections",
                "store/declared_projections.py",
                "in the transaction: " + ", ".join(projection.qn for projection in followers),
            )
        )
    return steps


def _entity_steps(registry: Registry, entity_def: EntityDef, verb: str) -> list[PlanStep]:
    """The executor's steps for ``verb`` of ``entity_def``, in the order it runs them."""
    entity = entity_def.entity
    key = entity_def.key
    steps: list[PlanStep] = []
    if verb in ("create", "update"):
        steps.append(
            PlanStep(
                "validation_and_hooks",
                "service/executor.py",
                f"defaults, pre-save and validate hooks of {key}",
            )
        )
        bounded = sorted(name for name, f in entity.fields.items() if has_rules(f))
        if bounded:
            steps.append(
                PlanStep(
                    "field_rules",
                    "model/field_rules.py",
                    f"format, min/max and item bounds of {', '.join(bounded)} (422)",
                )
            )
        gated = []
        flagged = sorted(instruction_fields(entity))
        if flagged:
            gated.append(f"instruction fields {', '.join(flagged)} need a high-risk entry")
        personal = sorted(entity.personal_fields)
        if personal:
            gated.append(f"personal fields {', '.join(personal)} need public intake if anonymous")
        if gated:
            steps.append(PlanStep("gates", "service/gates.py", "; ".join(gated)))
        if entity.transitions and verb == "update":
            steps.append(
                PlanStep("transitions", "model/transitions.py", f"the declared moves of {key}")
            )
        steps.append(
            PlanStep("field_access", "service/field_access.py", "each field's write= rule")
        )
        referring = registry.references(key)
        if referring:
            named = ", ".join(f"{ref.field} -> {ref.target.key}" for ref in referring)
            steps.append(
                PlanStep(
                    "references",
                    "service/references.py",
                    f"{named}: a live row of the tenant, read in the transaction (422)",
                )
            )
        held = sorted(file_fields(entity_def))
        if held:
            steps.append(
                PlanStep(
                    "files",
                    "service/files.py",
                    f"{', '.join(held)}: a live upload of the tenant of a type and size the "
                    "field takes, held by no other row, locked in the transaction (422)",
                )
            )
        if personal:
            steps.append(
                PlanStep(
                    "sealing",
                    "personal/entities.py",
                    f"{', '.join(personal)} sealed under the subject's key",
                )
            )
    elif verb == "delete" and not entity.soft_delete:
        steps.append(
            PlanStep("gates", "service/gates.py", "a hard delete needs a high-risk entry handler")
        )
    if verb == "delete" and restricting(registry, entity_def):
        blocking = ", ".join(
            f"{ref.entity.key}.{ref.field}" for ref in restricting(registry, entity_def)
        )
        steps.append(
            PlanStep(
                "delete_restrict",
                "service/references.py",
                f"refused while live rows refer to it through {blocking} (409)",
            )
        )
    if verb == "restore" and registry.references(key):
        steps.append(
            PlanStep("references", "service/references.py", "what the row refers to is live")
        )
    steps.append(
        PlanStep(
            "append_and_project",
            "store/events.py",
            f"the event of {key} at its expected version, then its row",
        )
    )
    return steps
