"""Every define-time error names what is wrong and where."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from asanoha import Access, Agent, DefinitionError, Entity, Feature, Registry, fields
from asanoha.platform.model import instruction_fields, resolve_agent_exposure


def prompt_entity(*, soft_delete: bool = False, body_default: str | None = None) -> Entity:
    body_options = {} if body_default is None else {"default": body_default}
    return Entity(
        table="prompts",
        soft_delete=soft_delete,
        fields={
            "label": fields.text(required=True, personal=False, reason="fixture"),
            "body": fields.long_text(
                personal=False, reason="fixture", read_as_instruction=True, **body_options
            ),
        },
    )


ADMIN = Access(roles=["Admin"])


class Payload(BaseModel):
    label: str


def test_write_handler_without_access_rule_is_rejected_naming_it() -> None:
    feature = Feature("shop")
    with pytest.raises(DefinitionError, match=r"shop:write:place-order declares no access rule"):

        @feature.write_handler("place_order")
        def place_order(payload: Payload, ctx: object) -> None: ...


def test_crud_without_read_access_names_the_query_handler() -> None:
    with pytest.raises(DefinitionError, match=r"shop:query:prompt:list declares no access rule"):
        Feature("shop").crud("prompt", prompt_entity(soft_delete=True), write=ADMIN)


def test_blank_open_to_all_reason_is_rejected() -> None:
    feature = Feature("shop")
    with pytest.raises(DefinitionError, match=r"shop:query:browse: .*non-blank reason"):

        @feature.query_handler("browse", access=Access(open_to_all="  "))
        def browse(payload: Payload, ctx: object) -> None: ...


def test_blank_open_to_all_denies_at_runtime_too() -> None:
    from asanoha import SessionUser

    assert not Access(open_to_all="").admits(SessionUser.of("u", "t", ["Admin"]))
    assert Access(open_to_all="catalogue").admits(SessionUser.of("u", "t"))
    assert not Access(open_to_all="catalogue").admits(SessionUser.anonymous("t"))


@pytest.mark.parametrize("kind", ["text", "long_text"])
def test_text_field_without_personal_stance_is_rejected_naming_the_field(kind: str) -> None:
    with pytest.raises(
        DefinitionError, match=r"field 'note' of entity 'notes' declares no personal-data stance"
    ):
        Entity(table="notes", fields={"note": getattr(fields, kind)()})


def test_personal_false_needs_a_reason() -> None:
    with pytest.raises(DefinitionError, match=r"field 'note' .*needs a non-empty reason"):
        Entity(table="notes", fields={"note": fields.text(personal=False, reason=" ")})


def test_personal_of_must_name_a_field() -> None:
    with pytest.raises(DefinitionError, match=r"field 'note' .*must name another field"):
        Entity(table="notes", fields={"note": fields.text(personal={"of": "author"})})
    Entity(
        table="notes",
        fields={
            "author": fields.reference("users"),
            "note": fields.text(personal={"of": "author"}),
        },
    )


@pytest.mark.parametrize("kind", ["integer", "number", "boolean", "timestamp", "date", "decimal"])
def test_read_as_instruction_on_a_non_text_field_is_rejected(kind: str) -> None:
    with pytest.raises(
        DefinitionError,
        match=rf"field 'n' of entity 'things': read_as_instruction .* not on {kind}",
    ):
        Entity(table="things", fields={"n": getattr(fields, kind)(read_as_instruction=True)})


def test_read_as_instruction_is_allowed_on_json() -> None:
    entity = Entity(
        table="things",
        fields={"spec": fields.json(read_as_instruction=True, personal=False, reason="x")},
    )
    assert instruction_fields(entity) == {"spec"}


def test_exclude_fields_with_unknown_field_is_rejected() -> None:
    with pytest.raises(
        DefinitionError, match=r"exclude_fields\['update'\] names unknown field 'nope'"
    ):
        Feature("f").crud(
            "prompt", prompt_entity(), write=ADMIN, read=ADMIN, exclude_fields={"update": ["nope"]}
        )


def test_exclude_fields_cannot_drop_a_required_field_from_create() -> None:
    with pytest.raises(DefinitionError, match=r"field 'label' is required without a default"):
        Feature("f").crud(
            "prompt", prompt_entity(), write=ADMIN, read=ADMIN, exclude_fields={"create": ["label"]}
        )


def test_exclude_fields_with_unknown_verb_is_rejected() -> None:
    with pytest.raises(
        DefinitionError, match=r"exclude_fields takes 'create' and 'update', not 'delete'"
    ):
        Feature("f").crud(
            "prompt", prompt_entity(), write=ADMIN, read=ADMIN, exclude_fields={"delete": ["body"]}
        )


def test_duplicate_qualified_names_fail_when_the_registry_is_built() -> None:
    first, second = Feature("shop"), Feature("shop")
    for feature in (first, second):

        @feature.write_handler("checkout", access=ADMIN)
        def checkout(payload: Payload, ctx: object) -> None: ...

    with pytest.raises(DefinitionError, match=r"feature 'shop' is registered twice"):
        Registry([first, second])


def test_duplicate_handler_in_one_feature_fails_when_the_registry_is_built() -> None:
    feature = Feature("shop")
    for _ in range(2):

        @feature.write_handler("checkout", access=ADMIN)
        def checkout(payload: Payload, ctx: object) -> None: ...

    with pytest.raises(DefinitionError, match=r"'shop:write:checkout' is defined twice"):
        Registry([feature])


def test_hard_delete_declared_below_high_is_rejected_naming_handler_reason_and_risk() -> None:
    with pytest.raises(DefinitionError) as raised:
        Feature("f").crud(
            "prompt", prompt_entity(), write=ADMIN, read=ADMIN, agent={"delete": Agent(risk="mid")}
        )
    message = str(raised.value)
    assert "f:write:prompt:delete" in message
    assert "risk='mid'" in message
    assert "hard-deletes" in message


def test_soft_delete_is_not_forced_high() -> None:
    feature = Feature("f")
    feature.crud(
        "prompt",
        prompt_entity(soft_delete=True),
        write=ADMIN,
        read=ADMIN,
        exclude_fields={"update": ["body"], "create": ["body"]},
        agent={"delete": Agent(risk="low")},
    )
    registry = Registry([feature])
    assert resolve_agent_exposure(registry.handler("f:write:prompt:delete")).risk == "low"


@pytest.mark.parametrize("verb", ["create", "update"])
def test_create_or_update_writing_an_instruction_field_declared_mid_is_rejected(verb: str) -> None:
    with pytest.raises(
        DefinitionError,
        match=rf"f:write:prompt:{verb} declares Agent\(risk='mid'\).*read_as_instruction fields \['body'\]",
    ):
        Feature("f").crud(
            "prompt", prompt_entity(), write=ADMIN, read=ADMIN, agent={verb: Agent(risk="mid")}
        )


def test_standard_writes_with_instruction_fields_resolve_high_without_declaring() -> None:
    feature = Feature("f")
    feature.crud("prompt", prompt_entity(), write=ADMIN, read=ADMIN)
    registry = Registry([feature])
    for verb in ("create", "update", "delete"):
        assert resolve_agent_exposure(registry.handler(f"f:write:prompt:{verb}")).risk == "high"
    assert resolve_agent_exposure(registry.handler("f:query:prompt:list")).risk == "low"


def test_create_excluding_a_defaulted_instruction_field_is_still_high() -> None:
    entity = prompt_entity(body_default="be helpful")
    assert instruction_fields(entity, "create", {"body"}) == {"body"}
    with pytest.raises(
        DefinitionError, match=r"f:write:prompt:create declares Agent\(risk='mid'\)"
    ):
        Feature("f").crud(
            "prompt",
            entity,
            write=ADMIN,
            read=ADMIN,
            exclude_fields={"create": ["body"]},
            agent={"create": Agent(risk="mid")},
        )


def test_update_excluding_every_instruction_field_is_not_forced() -> None:
    feature = Feature("f")
    feature.crud(
        "prompt",
        prompt_entity(soft_delete=True),
        write=ADMIN,
        read=ADMIN,
        exclude_fields={"update": ["body"]},
        agent={"update": Agent(risk="mid")},
    )
    registry = Registry([feature])
    assert resolve_agent_exposure(registry.handler("f:write:prompt:update")).risk == "mid"
    assert instruction_fields(prompt_entity(), "update", {"body"}) == frozenset()


def test_custom_write_defaults_to_mid_and_description_exposes() -> None:
    feature = Feature("f")

    @feature.write_handler("rename", access=ADMIN)
    def rename(payload: Payload, ctx: object) -> None:
        """Rename a thing."""

    @feature.write_handler("hidden", access=ADMIN, agent=Agent(expose=False))
    def hidden(payload: Payload, ctx: object) -> None:
        """Documented but hidden."""

    registry = Registry([feature])
    exposure = resolve_agent_exposure(registry.handler("f:write:rename"))
    assert (exposure.risk, exposure.expose) == ("mid", True)
    assert resolve_agent_exposure(registry.handler("f:write:hidden")).expose is False


def test_handler_without_payload_model_is_rejected() -> None:
    feature = Feature("f")
    with pytest.raises(DefinitionError, match=r"f:write:raw: annotate the first parameter"):

        @feature.write_handler("raw", access=ADMIN)
        def raw(payload: dict, ctx: object) -> None: ...  # type: ignore[type-arg]


def test_job_without_trigger_and_job_on_unknown_handler_are_rejected() -> None:
    feature = Feature("f")
    with pytest.raises(DefinitionError, match=r"f:job:idle has no trigger"):
        feature.job("idle")
    feature.job("notify", on="f:write:missing")(lambda payload, ctx: None)
    with pytest.raises(
        DefinitionError,
        match=r"f:job:notify: on='f:write:missing' names no registered write handler",
    ):
        Registry([feature])


def test_names_are_converted_to_kebab_case_and_validated() -> None:
    from asanoha.platform.model import make_qn, parse_qn, to_kebab

    assert to_kebab("send_welcome_mail") == "send-welcome-mail"
    assert to_kebab("sendWelcomeMail") == "send-welcome-mail"
    assert make_qn("shop", "write", "prompt:create") == "shop:write:prompt:create"
    assert str(parse_qn("shop:event:prompt.created")) == "shop:event:prompt.created"
    with pytest.raises(DefinitionError):
        Feature("Shop")
    with pytest.raises(ValueError):
        parse_qn("shop:nonsense:x")
