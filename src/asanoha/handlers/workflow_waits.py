"""The bundled ``workflow-waits`` feature: the consumer that resumes a workflow's waits.

``App`` adds it when a workflow declares ``.wait(...)``. Its consumer
``workflow-waits:consumer:match`` follows the event types the waits name, with a durable
cursor like any consumer (gap-safe, in order, its effects committed with the cursor's
advance): each event marks the waits it matches, of the runs of its tenant that started
before it was appended, once each, and a wait the run has reached ends as succeeded with the
event as its result (``platform/jobs/workflow_waits.event_matched``). A wait reached later finds
its mark when it starts. Its lag, failures and restarts are those of any consumer
(``asanoha consumers``, the console).
"""

from __future__ import annotations

from collections.abc import Sequence

from asanoha.platform.consumers.context import ConsumerContext, platform_unit
from asanoha.platform.jobs import workflow_waits
from asanoha.platform.model import Feature
from asanoha.platform.model.workflows import StepDef, WorkflowDef
from asanoha.platform.store import StoredEvent

FEATURE = "workflow-waits"
MATCH_CONSUMER = "workflow-waits:consumer:match"


def waits_feature(workflows: Sequence[WorkflowDef]) -> Feature:
    """The feature whose consumer resumes the waits of ``workflows``."""
    waiting: dict[str, list[tuple[WorkflowDef, StepDef]]] = {}
    for workflow in workflows:
        for step in workflow.waits:
            assert step.hold is not None and step.hold.event is not None
            waiting.setdefault(step.hold.event, []).append((workflow, step))
    feature = Feature(FEATURE)

    @feature.consumer("match", on=sorted(waiting))
    def match(event: StoredEvent, ctx: ConsumerContext) -> None:
        """Mark the waits ``event`` matches; end those their runs have reached."""
        service, request = platform_unit(ctx)
        matched = workflow_waits.MatchedEvent(
            event.id, event.type, event.tenant_id, event.stream_id, event.payload, event.created_at
        )
        request.outbox.extend(
            workflow_waits.event_matched(
                request.conn,
                service.tables,
                service.registry.workflow,
                waiting.get(event.type, ()),
                matched,
            )
        )

    return feature


def workflows_that_wait(features: Sequence[Feature]) -> list[WorkflowDef]:
    """The workflows of ``features`` that declare a wait."""
    return [workflow for feature in features for workflow in feature.workflows if workflow.waits]
