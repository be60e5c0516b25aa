"""Mistakes in a definition fail when it is made, with a message that names the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest

from asanoha import Access, Agent, Entity, Feature, Registry, fields
from asanoha.platform.errors import ConflictError, DefinitionError, NotFoundError, render

ADMIN = Access(roles=["Admin"])


def test_access_with_a_bare_string_of_roles_is_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"Access\(roles=\['Admin'\]\)"):
        Access(roles="Admin")


def test_access_with_a_blank_or_non_string_role_is_rejected() -> None:
    for roles in ([""], [3]):
        with pytest.raises(DefinitionError, match="roles are non-blank strings"):
            Access(roles=roles)  # type: ignore[list-item]


@pytest.mark.parametrize("retries", [None, "2", 1.5, True, -1])
def test_job_retries_that_are_not_a_count_are_a_definition_error(retries: Any) -> None:
    with pytest.raises(DefinitionError, match=r"shop:job:ship: retries must be a whole number"):
        Feature("shop").job("ship", manual=True, retries=retries)


def test_job_timeout_and_backoff_of_the_wrong_type_are_definition_errors() -> None:
    with pytest.raises(DefinitionError, match="shop:job:ship: timeout"):
        Feature("shop").job("ship", manual=True, timeout="5")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="shop:job:ship: backoff"):
        Feature("shop").job("ship", manual=True, backoff=2)  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", ["", "   ", 3])
def test_acts_for_system_without_a_reason_is_a_definition_error(reason: Any) -> None:
    with pytest.raises(DefinitionError, match=r"shop:job:ship: acts_for_system= needs a non"):
        Feature("shop").job("ship", manual=True, acts_for_system=reason)
    with pytest.raises(DefinitionError, match=r"shop:consumer:mail: acts_for_system= needs a"):
        Feature("shop").consumer("mail", on=["shop:event:sent"], acts_for_system=reason)


def test_acts_for_system_with_a_reason_is_kept_on_the_definition() -> None:
    feature = Feature("shop")
    feature.job("ship", manual=True, acts_for_system="nightly cleanup")(lambda p, c: None)
    feature.consumer("mail", on=["shop:event:sent"], acts_for_system="outbox")(lambda e, c: None)
    assert feature.jobs[0].acts_for_system == "nightly cleanup"
    assert feature.consumers[0].acts_for_system == "outbox"
    assert Feature("x").job("plain", manual=True)(lambda p, c: None) is not None


def test_the_hard_delete_floor_suggests_high_risk_or_soft_delete_not_exclusions() -> None:
    entity = Entity(table="notes", fields={"text": fields.text(personal=False, reason="fixture")})
    with pytest.raises(DefinitionError) as raised:
        Feature("f").crud(
            "note", entity, write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="mid")}
        )
    message = str(raised.value)
    assert "Agent(risk='high')" in message
    assert "soft_delete=True" in message
    assert "exclude" not in message


def test_errors_raised_without_details_keep_no_placeholders() -> None:
    for error in (ConflictError(), NotFoundError()):
        assert "{" not in error.message and "(unknown)" in error.message
    assert "{" not in render("unique_violation", {}, "developer", "de")


def test_placeholders_are_filled_by_name_only() -> None:
    text = render(
        "entity_not_found", {"entity": "f:note", "id": "{id.__class__}"}, "developer", "en"
    )
    assert text == "No f:note with id {id.__class__} exists in this tenant."


def test_declaring_on_a_feature_after_an_app_was_built_from_it_fails():
    feature = Feature("late")

    @feature.job("early", manual=True)
    def early(payload, ctx):
        return None

    Registry([feature])
    with pytest.raises(
        DefinitionError, match=r"feature 'late': job 'late:job:notify' is declared after"
    ):

        @feature.job("notify", manual=True)
        def notify(payload, ctx):
            return None

    with pytest.raises(DefinitionError, match=r"feature 'late': consumer 'late:consumer:mailer'"):
        feature.consumer("mailer", on=["late:event:sent"])
    with pytest.raises(DefinitionError, match=r"feature 'late': event 'late:event:sent'"):
        feature.event("sent")
    with pytest.raises(DefinitionError, match=r"feature 'late': handler 'late:write:go'"):
        feature.write_handler("go", access=Access(roles=["Admin"]))
    with pytest.raises(DefinitionError, match=r"feature 'late': entity 'note'"):
        feature.crud("note", Entity(table="late_notes", fields={}))
    # Nothing was added behind the registry's back.
    assert [job.qn for job in feature.jobs] == ["late:job:early"]
    assert feature.consumers == [] and feature.handlers == []


def test_a_registry_that_refuses_its_features_leaves_them_open():
    feature = Feature("dup")
    Feature("dup")
    with pytest.raises(DefinitionError, match="registered twice"):
        Registry([feature, Feature("dup")])
    feature.event("still-open")


@pytest.mark.parametrize("stance", [True, "yes", "person"])
def test_an_unknown_personal_stance_lists_the_ones_there_are(stance: Any) -> None:
    with pytest.raises(DefinitionError, match="unknown personal stance") as raised:
        Entity(table="people", fields={"name": fields.text(personal=stance)})
    for known in ("personal='self'", "personal='tenant'", "{'of': '<field>'}", "False"):
        assert known in str(raised.value)


@pytest.mark.parametrize(
    ("cron", "says"),
    [
        ("* * * *", "must have five fields"),
        ("0 0 0 * * *", "must have five fields"),
        ("60 * * * *", "the minute field '60'"),
        ("0 24 * * *", "the hour field '24'"),
        ("0 0 32 * *", "the day-of-month field '32'"),
        ("0 0 * 13 *", "the month field '13'"),
        ("0 0 * * 7", "the day-of-week field '7'"),
        ("0 9 * * mon_fri", "the day-of-week field 'mon_fri'"),
    ],
)
def test_a_cron_expression_that_beat_could_not_read_fails_at_definition(
    cron: str, says: str
) -> None:
    with pytest.raises(DefinitionError, match=re.escape(f"shop:job:tick: cron={cron!r}")) as raised:
        Feature("shop").job("tick", cron=cron)
    assert says in str(raised.value)


@pytest.mark.parametrize("cron", ["30 2 * * *", "*/5 * * * *", "0 9 * * mon-fri", "0 0 1,15 * *"])
def test_the_readmes_cron_expressions_are_accepted(cron: str) -> None:
    Feature("shop").job("tick", cron=cron)(lambda payload, ctx: None)
