from pydantic import BaseModel

from asanoha.platform.model import Access, Entity, Feature, Registry, fields
from asanoha.workers.redaction import REDACTED, personal_keys, redact, task_reprs

person = Entity(
    table="people",
    fields={
        "name": fields.text(personal="self"),
        "email": fields.text(personal="self"),
        "team": fields.text(personal=False, reason="an organisational unit"),
    },
)


def _registry():
    feature = Feature("crm")
    feature.crud("person", person, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))

    class Note(BaseModel):
        text: str

    @feature.write_handler("note", access=Access(roles=["Admin"]))
    def note(payload: Note, ctx):
        return None

    @feature.job("welcome", on="crm:write:person:create")
    def welcome(payload, ctx):
        return None

    @feature.job("resync", on="crm:write:person:update")
    def resync(payload, ctx):
        return None

    @feature.job("noted", on="crm:write:note")
    def noted(payload, ctx):
        return None

    @feature.job("manual", manual=True)
    def manual(payload, ctx):
        return None

    return Registry([feature])


def test_a_job_on_a_crud_write_knows_the_entitys_personal_fields():
    registry = _registry()
    assert personal_keys(registry, registry.job("crm:job:welcome")) == {"name", "email"}


def test_jobs_without_a_crud_trigger_redact_nothing():
    registry = _registry()
    assert personal_keys(registry, registry.job("crm:job:noted")) == frozenset()
    assert personal_keys(registry, registry.job("crm:job:manual")) == frozenset()


def test_update_payloads_are_redacted_inside_changes():
    registry = _registry()
    keys = personal_keys(registry, registry.job("crm:job:resync"))
    payload = {"id": "x", "version": 2, "changes": {"email": "a@b.c", "team": "ops"}}
    assert redact(payload, keys) == {
        "id": "x",
        "version": 2,
        "changes": {"email": REDACTED, "team": "ops"},
    }


def test_task_reprs_hide_personal_values_and_keep_the_rest():
    reprs = task_reprs({"name": "Ada", "team": "ops"}, {"tenant_id": "t"}, frozenset({"name"}))
    assert "Ada" not in reprs["argsrepr"]
    assert "ops" in reprs["argsrepr"]
    assert "'tenant_id': 't'" in reprs["kwargsrepr"]
