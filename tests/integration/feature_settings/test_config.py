"""``feature.config``: defaults, per-tenant values through ``config:write:set``, reads in
handlers and jobs, and the refusals of the bundled handler."""

from __future__ import annotations

from typing import Any

from asanoha.testing import TestUsers
from tests.integration.feature_settings.features import SEEN

SET = "config:write:set"


def test_a_handler_reads_the_default_until_the_tenant_sets_its_own_value(stack: Any) -> None:
    assert stack.http.query_ok("mailer:query:settings", {}, TestUsers.admin)["config"] == {
        "sender": "noreply@example.org",
        "retries": 3,
        "region": "eu",
    }
    stored = stack.http.write_ok(
        SET, {"feature": "mailer", "key": "retries", "value": "5"}, TestUsers.admin
    )
    assert stored == {"feature": "mailer", "key": "retries", "value": 5}
    stack.http.write_ok(
        SET, {"feature": "mailer", "key": "sender", "value": "a@shop.test"}, TestUsers.admin
    )
    sent = stack.http.write_ok("mailer:write:send", {"to": "c@x.test"}, TestUsers.admin)
    assert (sent["sender"], sent["retries"]) == ("a@shop.test", 5)
    # Another tenant keeps the default.
    other = stack.http.query_ok("mailer:query:settings", {}, TestUsers.other_tenant)
    assert other["config"]["sender"] == "noreply@example.org"
    # The job triggered by the write reads the same tenant's value.
    stack.drain()
    assert [seen["sender"] for seen in SEEN] == ["a@shop.test"]


def test_null_goes_back_to_the_default_and_the_list_says_where_values_come_from(stack):
    stack.http.write_ok(SET, {"feature": "mailer", "key": "retries", "value": 9}, TestUsers.admin)
    listed = stack.http.query_ok("config:query:list", {"feature": "mailer"}, TestUsers.admin)
    by_key = {row["key"]: row for row in listed["config"]}
    assert (by_key["retries"]["value"], by_key["retries"]["source"]) == (9, "tenant")
    assert (by_key["sender"]["value"], by_key["sender"]["source"]) == (
        "noreply@example.org",
        "default",
    )
    assert listed["secrets"] == [{"feature": "mailer", "name": "smtp_password", "is_set": False}]
    stack.http.write_ok(
        SET, {"feature": "mailer", "key": "retries", "value": None}, TestUsers.admin
    )
    assert (
        stack.http.query_ok("mailer:query:settings", {}, TestUsers.admin)["config"]["retries"] == 3
    )


def test_one_value_for_every_tenant_is_set_by_the_operator_only(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(
            SET, {"feature": "mailer", "key": "region", "value": "us"}, TestUsers.admin
        )
    assert (error.http_status, error.code, error.reason) == (
        403,
        "access_denied",
        "config_not_per_tenant",
    )
    assert error.details["key"] == "region"
    with stack.db.begin() as conn:
        stack.service.feature_settings.set_config(
            conn, None, "mailer", "region", "us", "test", for_every_tenant=True
        )
    for user in (TestUsers.admin, TestUsers.other_tenant):
        config = stack.http.query_ok("mailer:query:settings", {}, user)["config"]
        assert config["region"] == "us"


def test_a_value_the_declared_type_refuses_is_422_and_nothing_is_stored(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(
            SET, {"feature": "mailer", "key": "retries", "value": "many"}, TestUsers.admin
        )
    assert (error.http_status, error.code, error.reason) == (
        422,
        "unprocessable",
        "config_value_invalid",
    )
    assert (error.details["feature"], error.details["key"]) == ("mailer", "retries")
    assert stored_rows(stack) == []


def test_an_undeclared_key_is_404_naming_feature_and_key(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(
            SET, {"feature": "mailer", "key": "colour", "value": "red"}, TestUsers.admin
        )
    assert (error.http_status, error.reason) == (404, "config_key_not_found")
    assert (error.details["feature"], error.details["key"]) == ("mailer", "colour")
    assert stored_rows(stack) == []


def test_a_plain_user_may_not_set_configuration(stack: Any) -> None:
    with stack.nothing_written():
        error = stack.http.write_err(
            SET, {"feature": "mailer", "key": "sender", "value": "x@y.test"}, TestUsers.user
        )
    assert (error.http_status, error.code, error.reason) == (403, "access_denied", "role_required")
    assert stored_rows(stack) == []


def stored_rows(stack: Any) -> list[Any]:
    table = stack.tables.feature_settings
    with stack.db.connect() as conn:
        return list(conn.execute(table.select()).all())
