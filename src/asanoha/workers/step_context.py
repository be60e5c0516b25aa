"""The context of a workflow step: a ``JobContext`` with its run, step, item and the results
of the steps before it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from asanoha.platform.jobs import workflows
from asanoha.platform.model import JobDef
from asanoha.platform.service import Service
from asanoha.workers.job_context import JobContext, JobMeta


class StepContext(JobContext):
    """The second argument of a workflow step: everything a ``JobContext`` has, plus
    ``run_id``, ``step`` (its name), ``item`` (the item's index in a mapped step, else
    ``None``) and ``results`` (by step name: the result of every earlier step; a mapped
    step's as the list of its items' results, in item order)."""

    def __init__(
        self,
        service: Service,
        job: JobDef,
        meta: JobMeta,
        *,
        task_id: str,
        retries: int,
        headers: Mapping[str, Any],
        trigger_result: Any = None,
    ) -> None:
        super().__init__(
            service, job, meta, task_id=task_id, retries=retries, trigger_result=trigger_result
        )
        step = job.workflow_step
        self.run_id = uuid.UUID(str(headers[workflows.RUN_HEADER]))
        self.step: str = step.name
        self.item: int | None = (
            int(headers[workflows.ITEM_HEADER]) if step.map is not None else None
        )
        self.results: dict[str, Any] = self._earlier_results(service)

    def _earlier_results(self, service: Service) -> dict[str, Any]:
        workflow = service.registry.workflow(self.job.workflow_step.workflow_qn)
        if workflow is None:
            return {}
        engine = service.database.engine
        with engine.connect() as conn:
            stored = workflows.results_of(
                conn, service.tables, workflow, self.run_id, workflow.earlier(self.step)
            )
        revealed: dict[str, Any] = service.personal.reveal_detached(engine, stored)
        return revealed
