"""Definitions of ``feature.config`` / ``feature.secret`` / ``Feature(toggleable=...)``, and
the pure parts of ``ctx.locale`` (``Accept-Language``) and the secret guard."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from asanoha import Feature
from asanoha.platform.errors import DefinitionError, InternalError
from asanoha.platform.model.place import preferred_language
from asanoha.platform.service import secret_guard


class Smtp(BaseModel):
    host: str
    port: int = 25


def test_a_config_key_keeps_its_default_converted_by_its_type() -> None:
    feature = Feature("mailer")
    assert feature.config("retries", default="3", type=int).default == 3
    smtp = feature.config("smtp", default={"host": "mx"}, type=Smtp)
    assert smtp.default == {"host": "mx", "port": 25}
    assert smtp.coerce({"host": "a", "port": "26"}) == {"host": "a", "port": 26}


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda f: f.config("Sender", default="x"), "feature 'mailer', config 'Sender'"),
        (lambda f: f.config("port", default="x", type=int), "config 'port': the default 'x'"),
        (lambda f: f.config("host"), "config 'host': declare type="),
        (lambda f: f.config("flag", default=True, per_tenant="yes"), "per_tenant= takes"),
        (lambda f: (f.secret("key"), f.secret("key")), "secret 'key' is declared twice"),
        (lambda f: f.secret("Key!"), "feature 'mailer', secret 'Key!'"),
    ],
)
def test_definition_mistakes_name_the_feature_and_the_key(declare, message) -> None:
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(")):
        declare(Feature("mailer"))


def test_a_toggle_takes_booleans() -> None:
    with pytest.raises(DefinitionError, match="feature 'mailer': toggleable= takes True or"):
        Feature("mailer", toggleable="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("de-AT,de;q=0.9,en;q=0.8", "de-AT"),
        ("en;q=0.2, DE", "de"),
        ("*", None),
        ("fr;q=0, it;q=0.1", "it"),
        ("not a tag!, es", "es"),
    ],
)
def test_the_preferred_language_of_accept_language(header, expected) -> None:
    assert preferred_language(header) == expected


def test_a_noted_secret_is_refused_in_output_and_redacted_from_log_records(caplog) -> None:
    import contextvars

    def scenario() -> None:
        secret_guard.note_secret("s3cret-value")
        with pytest.raises(InternalError) as raised:
            secret_guard.run_guarded("mailer:write:x", lambda: {"nested": ["s3cret-value"]})
        assert raised.value.reason == "secret_in_output"
        with pytest.raises(InternalError):
            secret_guard.run_guarded("mailer:write:x", _raise_with_secret)
        assert secret_guard.run_guarded("mailer:write:x", lambda: {"ok": 1}) == {"ok": 1}
        logging.getLogger("asanoha.test").warning("the value is %s", "s3cret-value")

    caplog.set_level(logging.WARNING)
    contextvars.copy_context().run(scenario)
    assert [r.getMessage() for r in caplog.records] == ["the value is [secret]"]
    # Outside the context that read it, nothing is noted.
    assert secret_guard.noted() == frozenset()


def _raise_with_secret() -> None:
    raise RuntimeError("login failed for s3cret-value")


def test_the_bundled_handlers_are_declared_high_risk_and_admin_only() -> None:
    from asanoha import Registry, SessionUser, resolve_agent_exposure
    from asanoha.handlers import feature_config

    registry = Registry(feature_config.features)
    for qn in ("config:write:set", "config:query:list", "secrets:write:set"):
        handler = registry.handler(qn)
        assert resolve_agent_exposure(handler).risk == "high"
        assert handler.access.admits(SessionUser.of("a", "t", ["Admin"]))
        assert not handler.access.admits(SessionUser.of("u", "t", ["User"]))
