"""``asanoha worker``, ``asanoha celery`` and ``asanoha flower``: what they hand to Celery
and what they refuse before starting anything."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.cli.worker import parse_lanes, worker_argv
from asanoha.platform.settings import Settings

APP = "tests.unit.cli.apps:app"


def invoke(*arguments: str, **env: str) -> tuple[int, str]:
    result = CliRunner(env={"COLUMNS": "200", **env}).invoke(cli, list(arguments))
    return result.exit_code, result.output


def test_worker_consumes_every_lane_under_a_prefixed_name_by_default() -> None:
    argv = worker_argv(
        Settings(queue_prefix="shop"),
        concurrency=3,
        lanes=parse_lanes([]),
        loglevel="INFO",
        hostname=None,
        extra=[],
    )
    assert argv == [
        "worker",
        "--concurrency=3",
        "--queues=shop.worker,shop.api",
        f"--hostname=shop@%h-{os.getpid()}",
        "--loglevel=INFO",
    ]


def test_worker_takes_lanes_hostname_level_and_celery_options_after_the_separator() -> None:
    argv = worker_argv(
        Settings(queue_prefix="shop"),
        concurrency=1,
        lanes=parse_lanes(["api", "api,worker"]),
        loglevel="DEBUG",
        hostname="reports@%h",
        extra=["--prefetch-multiplier=2", "--without-mingle"],
    )
    assert argv == [
        "worker",
        "--concurrency=1",
        "--queues=shop.api,shop.worker",
        "--hostname=reports@%h",
        "--loglevel=DEBUG",
        "--prefetch-multiplier=2",
        "--without-mingle",
    ]


@pytest.mark.parametrize(
    ("argument", "named"),
    [
        ("--concurrency=4", "--concurrency"),
        ("-c4", "--concurrency"),
        ("-Q", "--lanes"),
        ("--queues=other", "--lanes"),
        ("--hostname=x", "--hostname"),
        ("-l", "--loglevel"),
        ("--app=other:app", "--app"),
        ("--broker=redis://elsewhere", "ASANOHA_BROKER_URL"),
    ],
)
def test_worker_refuses_celery_options_asanoha_sets_itself(argument: str, named: str) -> None:
    code, output = invoke("worker", "--app", APP, "--", argument, "DEBUG")
    assert code == 2
    assert f"{argument} after -- sets an option asanoha sets itself" in output
    assert named in output


def test_worker_refuses_an_unknown_lane_and_log_level() -> None:
    code, output = invoke("worker", "--app", APP, "--lanes", "worker,batch")
    assert code == 2
    assert "no lane 'batch'; the lanes are worker, api" in output
    code, output = invoke("worker", "--app", APP, "--loglevel", "loud")
    assert code == 2
    assert "'loud' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in output


def test_worker_celery_and_flower_refuse_the_in_process_broker() -> None:
    for command in (
        ["worker", "--app", APP],
        ["celery", "--app", APP, "--", "inspect", "ping"],
        ["flower", "--app", APP, "--no-auth"],
    ):
        code, output = invoke(*command)
        assert code == 1, output
        assert f"asanoha {command[0]} needs a broker other processes reach" in output


def test_celery_needs_a_command_after_the_separator_and_keeps_the_application() -> None:
    code, output = invoke("celery", "--app", APP)
    assert code == 2
    assert f"asanoha celery --app {APP} -- inspect ping" in output
    code, output = invoke("celery", "--app", APP, "--", "-A", "other:app", "inspect", "ping")
    assert code == 2
    assert "the application comes from --app" in output


def test_flower_without_authentication_says_what_to_pass() -> None:
    code, output = invoke("flower", "--app", APP)
    assert code == 2
    assert "--basic-auth user:password" in output
    assert "ASANOHA_FLOWER_BASIC_AUTH=user:password" in output
    assert "--no-auth" in output


def test_flower_takes_basic_auth_from_the_environment() -> None:
    # Authentication is settled, so it gets as far as the broker check.
    code, output = invoke("flower", "--app", APP, ASANOHA_FLOWER_BASIC_AUTH="ops:secret-1")
    assert code == 1
    assert "needs a broker other processes reach" in output


@pytest.mark.parametrize("value", ["ops", "ops:", ":hunter2", "ops:hunter2,admin"])
def test_flower_refuses_malformed_basic_auth_without_echoing_it(value: str) -> None:
    code, output = invoke("flower", "--app", APP, "--basic-auth", value)
    assert code == 2
    assert "expected user:password" in output
    assert "hunter2" not in output


def test_flower_refuses_basic_auth_together_with_no_auth_and_owned_options() -> None:
    code, output = invoke("flower", "--app", APP, "--basic-auth", "ops:pw", "--no-auth")
    assert code == 2
    assert "not both" in output
    code, output = invoke("flower", "--app", APP, "--no-auth", "--", "--port=1")
    assert code == 2
    assert "--port=1 after -- sets an option asanoha sets itself" in output
