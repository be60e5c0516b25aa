"""``Entity(retention=Retention(...))``: a policy the entity can keep, or a definition error
that names the entity and what to change."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from asanoha import App, DefinitionError, Entity, Feature, Retention, fields
from asanoha.handlers.retention import APPLY_JOB, policies
from asanoha.platform.settings import Settings

NAME = fields.text(personal="self")
PLAN = fields.text(personal=False, reason="a product name")


def entity(retention: Any, **options: Any) -> Entity:
    options.setdefault("fields", {"name": NAME, "plan": PLAN})
    return Entity(table="members", retention=retention, **options)


def test_a_policy_is_kept_with_its_age() -> None:
    kept = entity(Retention(keep_for="90d", strategy="anonymize"))
    assert kept.retention is not None
    assert kept.retention.age == dt.timedelta(days=90)
    hours = entity(Retention(keep_for=dt.timedelta(hours=5), strategy="block_delete"))
    assert hours.retention is not None and hours.retention.age == dt.timedelta(hours=5)
    assert entity(None).retention is None


def test_an_unknown_strategy_is_refused() -> None:
    with pytest.raises(
        DefinitionError,
        match=r"entity 'members': retention strategy='purge' is unknown; use one of "
        r"'hard_delete', 'anonymize', 'block_delete'",
    ):
        entity(Retention(keep_for="30d", strategy="purge"))  # type: ignore[arg-type]


@pytest.mark.parametrize("wrong", ["1y", "0d", "", "thirty days", dt.timedelta(0)])
def test_a_wrong_age_is_refused(wrong: Any) -> None:
    with pytest.raises(
        DefinitionError, match=r"entity 'members': retention keep_for: .* is no age"
    ):
        entity(Retention(keep_for=wrong, strategy="hard_delete"))


def test_anonymize_without_a_personal_field_of_the_row_is_refused() -> None:
    with pytest.raises(
        DefinitionError,
        match=r"entity 'members': retention strategy='anonymize' .* no personal='self' "
        r"field, so there is nothing to forget",
    ):
        entity(Retention(keep_for="30d", strategy="anonymize"), fields={"plan": PLAN})


def test_anonymize_with_personal_data_of_another_subject_is_refused() -> None:
    # The note's author's key is shared with their other rows: it cannot be destroyed for
    # one row, so the note's text would stay readable.
    of_author = {
        "author": fields.reference("member"),
        "text": fields.text(personal={"of": "author"}),
    }
    with pytest.raises(
        DefinitionError,
        match=r"entity 'members': retention strategy='anonymize' .* field\(s\) \['text'\] "
        r"hold personal data of another subject",
    ):
        entity(Retention(keep_for="30d", strategy="anonymize"), fields={"name": NAME, **of_author})


def test_hard_delete_on_a_soft_deleted_entity_is_refused() -> None:
    with pytest.raises(
        DefinitionError,
        match=r"entity 'members': retention strategy='hard_delete' removes rows, but the "
        r"entity has soft_delete=True",
    ):
        entity(Retention(keep_for="30d", strategy="hard_delete"), soft_delete=True)


@pytest.mark.parametrize("wrong", ["30d", {"keep_for": "30d", "strategy": "anonymize"}])
def test_retention_takes_a_retention(wrong: Any) -> None:
    with pytest.raises(DefinitionError, match=r"entity 'members': retention takes Retention\("):
        entity(wrong)


def test_only_a_policy_the_job_acts_on_brings_the_daily_job() -> None:
    blocked = Feature("books")
    blocked.entity("ledger", entity(Retention(keep_for="3650d", strategy="block_delete")))
    assert policies([blocked]) == {}
    assert APPLY_JOB not in {job.qn for job in App([blocked], Settings()).registry.jobs}
    purged = Feature("crm")
    purged.entity("member", entity(Retention(keep_for="30d", strategy="anonymize")))
    assert list(policies([purged])) == ["crm:member"]
    jobs = {job.qn: job for job in App([purged], Settings()).registry.jobs}
    assert jobs[APPLY_JOB].cron is not None and not jobs[APPLY_JOB].per_tenant
    per_tenant = App([purged], Settings(), tenants=lambda: ["t1"]).registry.job(APPLY_JOB)
    assert per_tenant is not None and per_tenant.per_tenant
