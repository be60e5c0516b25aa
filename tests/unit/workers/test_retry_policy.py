import pytest

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model import Backoff, Feature, Registry
from asanoha.workers.retry_policy import check_job_limits, retry_countdown


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


def test_a_countdown_beyond_the_visibility_timeout_is_rejected_naming_the_job():
    job = _job(retries=13)  # 2 ** 12 s > 1 h
    with pytest.raises(DefinitionError, match=r"retrying:job:work.*visibility timeout"):
        check_job_limits([job], visibility_timeout=3600)


def test_a_timeout_beyond_the_visibility_timeout_is_rejected_naming_the_job():
    job = _job(timeout=7200)
    with pytest.raises(DefinitionError, match=r"retrying:job:work: timeout=7200"):
        check_job_limits([job], visibility_timeout=3600)


def test_delays_within_the_visibility_timeout_pass():
    check_job_limits([_job(retries=11, timeout=60)], visibility_timeout=3600)
    check_job_limits([_job(retries=30, backoff=Backoff.exponential(max=600))], 3600)
