import pytest

from asanoha.platform.errors import (
    AccessDeniedError,
    DefinitionError,
    NotFoundError,
    Reasons,
    ServiceUnavailableError,
    ValidationError,
)
from asanoha.platform.model import Backoff, Feature, Registry
from asanoha.platform.settings import Settings
from asanoha.workers.retry_policy import (
    broker_countdown_limit,
    check_job_limits,
    is_retryable,
    retry_countdown,
)


def _job(**options):
    feature = Feature("retrying")

    @feature.job("work", manual=True, **options)
    def work(payload, ctx):
        return None

    return Registry([feature]).job("retrying:job:work")


def test_default_backoff_is_exponential_from_one_second():
    job = _job(retries=3)
    assert [retry_countdown(job, a) for a in (1, 2, 3)] == [1.0, 2.0, 4.0]


def test_exponential_countdowns_are_deterministic_and_capped():
    job = _job(retries=4, backoff=Backoff.exponential(base=0.05, max=0.3))
    assert [retry_countdown(job, a) for a in (1, 2, 3, 4)] == [0.05, 0.1, 0.2, 0.3]
    assert [retry_countdown(job, a) for a in (1, 2, 3, 4)] == [0.05, 0.1, 0.2, 0.3]


def test_fixed_backoff_waits_the_same_before_every_retry():
    job = _job(retries=2, backoff=Backoff.fixed(0.3))
    assert [retry_countdown(job, a) for a in (1, 2)] == [0.3, 0.3]


def _settings(**values):
    return Settings(**values)


def test_a_timeout_beyond_the_visibility_timeout_is_rejected_naming_the_job():
    job = _job(timeout=7200)
    with pytest.raises(DefinitionError, match=r"retrying:job:work: its timeout \(7200 s\)"):
        check_job_limits([job], _settings(visibility_timeout=3600))


def test_long_countdowns_pass_because_the_database_holds_them():
    check_job_limits([_job(retries=30, timeout=60)], _settings(visibility_timeout=3600))
    job = _job(retries=13)  # 2 ** 12 s > 1 h: held in the database, not by the broker
    assert retry_countdown(job, 13) > broker_countdown_limit(job, _settings())


def test_the_broker_holds_short_countdowns_only_when_they_fit_with_the_run():
    settings = _settings(visibility_timeout=30, broker_countdown_max=60)
    job = _job(timeout=10)
    assert broker_countdown_limit(job, settings) == 30 - 10 - 5 - 1


class Forbidden(Exception):
    pass


@pytest.mark.parametrize(
    ("options", "error", "retryable"),
    [
        ({}, RuntimeError("x"), True),
        ({}, ValidationError(handler="h", fields=[]), False),
        ({}, AccessDeniedError(Reasons.ROLE_REQUIRED, handler="h", roles="Admin"), False),
        ({}, NotFoundError(Reasons.JOB_NOT_FOUND, job="j"), False),
        ({}, ServiceUnavailableError(), True),
        ({"retry_on": [ValidationError]}, ValidationError(handler="h", fields=[]), True),
        ({"retry_on": (ConnectionError,)}, RuntimeError("x"), False),
        ({"no_retry_on": Forbidden}, Forbidden(), False),
    ],
)
def test_which_errors_are_retried(options, error, retryable):
    assert is_retryable(_job(retries=3, **options), error) is retryable
