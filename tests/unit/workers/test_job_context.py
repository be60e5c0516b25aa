from typing import Any

import pytest

from asanoha.platform.model import Feature, Registry, SessionUser
from asanoha.workers.job_context import JobContext, JobMeta, MissingTenantError


class RecordingService:
    """Stands in for the service layer: records what the context asks of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.origins: list[Any] = []
        self.acting: list[Any] = []

    def dispatch_write(
        self,
        qn,
        payload,
        user,
        *,
        parent=None,
        meta=None,
        origin=None,
        acting=None,
        idempotency_key=None,
    ):
        assert parent is None  # a job's writes are each their own top-level write
        self.calls.append(("write", qn, payload, user, meta))
        self.origins.append(origin)
        self.acting.append(acting)
        return {"ok": True}

    def dispatch_query(self, qn, payload, user, *, parent=None, meta=None):
        self.calls.append(("query", qn, payload, user, meta))
        return []

    def enqueue_job(
        self, job_qn, payload, user, *, parent=None, trigger_name="manual", origin=None, **when
    ):
        self.calls.append(("enqueue", job_qn, payload, user, trigger_name))
        self.origins.append(origin)
        return "id"


def _job(retries: int):
    feature = Feature("ctx")

    @feature.job("work", manual=True, retries=retries)
    def work(payload, ctx):
        return None

    return Registry([feature]).job("ctx:job:work")


META = JobMeta(tenant_id="acme", triggered_by="u1", trigger_name="ctx:write:thing")


@pytest.mark.parametrize(
    ("retries", "request_retries", "attempt", "final"),
    [(2, 0, 1, False), (2, 1, 2, False), (2, 2, 3, True), (0, 0, 1, True)],
)
def test_attempt_is_one_based_and_final_when_no_retry_is_left(
    retries, request_retries, attempt, final
):
    ctx = JobContext(RecordingService(), _job(retries), META, task_id="t", retries=request_retries)
    assert (ctx.attempt, ctx.final_attempt) == (attempt, final)


def test_the_context_carries_the_trigger():
    ctx = JobContext(RecordingService(), _job(0), META, task_id="t", retries=0)
    assert ctx.tenant_id == "acme"
    assert ctx.triggered_by == "u1"
    assert ctx.trigger_name == "ctx:write:thing"
    assert ctx.trigger_event is None
    assert ctx.system_user == SessionUser.system("acme")


def test_write_runs_as_the_tenants_system_user_and_dispatch_names_the_parent_job():
    service = RecordingService()
    ctx = JobContext(service, _job(0), META, task_id="t", retries=0)
    ctx.write("ctx:write:thing", {"a": 1})
    user = SessionUser.of("u2", "acme", ["Admin"])
    ctx.write_as(user, "ctx:write:thing", {"a": 2})
    ctx.query_as(user, "ctx:query:things", {})
    ctx.dispatch("ctx:job:other", {"b": 1})
    (write, write_as, query, enqueue) = service.calls
    assert write[:4] == ("write", "ctx:write:thing", {"a": 1}, SessionUser.system("acme"))
    assert write[4].causation_id == "t"
    assert write_as[3] is user
    assert query[:2] == ("query", "ctx:query:things")
    assert enqueue == (
        "enqueue",
        "ctx:job:other",
        {"b": 1},
        SessionUser.system("acme"),
        "ctx:job:work",
    )


def test_headers_without_a_tenant_are_refused_never_defaulted():
    with pytest.raises(MissingTenantError):
        JobMeta.from_headers({})
    with pytest.raises(MissingTenantError):
        JobMeta.from_headers({"tenant_id": ""})
    meta = JobMeta.from_headers({"tenant_id": "t1", "trigger_name": "manual"})
    assert (meta.tenant_id, meta.trigger_name) == ("t1", "manual")


def test_the_trigger_carries_the_write_result():
    ctx = JobContext(
        RecordingService(), _job(0), META, task_id="t", retries=0, trigger_result={"id": "r1"}
    )
    assert ctx.trigger.name == "ctx:write:thing"
    assert ctx.trigger.result == {"id": "r1"}


def test_writes_name_the_job_and_its_acts_for_system_reason_for_the_gates():
    feature = Feature("ctx")
    feature.job("sweep", manual=True, acts_for_system="nightly retention")(lambda p, c: None)
    job = Registry([feature]).job("ctx:job:sweep")
    service = RecordingService()
    ctx = JobContext(service, job, META, task_id="t", retries=0)
    ctx.write("ctx:write:thing", {"a": 1})
    (acting,) = service.acting
    assert (acting.qn, acting.acts_for_system) == ("ctx:job:sweep", "nightly retention")
    assert service.origins == [META.origin]
