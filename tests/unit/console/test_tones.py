"""The colour of a state or an outcome: only a failure is red; a requeue, a snooze, a rate
limit's hold and a pause wait."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from asanoha.console.routes import JOB_STATES
from asanoha.console.tones import TONES, error_class, tone_of
from asanoha.platform.consumers.cursors import ConsumerStatusName
from asanoha.platform.jobs.attempts import RunStatus
from asanoha.platform.service.job_operations import REQUEUED

STYLESHEET = Path(__file__).parents[3] / "src/asanoha/console/static/console.css"


def _rule(selector: str) -> str:
    found = re.search(rf"^{re.escape(selector)} \{{([^}}]*)\}}", STYLESHEET.read_text(), re.M)
    assert found is not None, f"no rule for {selector} in console.css"
    return found.group(1)


def test_every_state_and_outcome_the_pages_show_has_a_tone() -> None:
    shown = {*JOB_STATES, *get_args(RunStatus), REQUEUED, *get_args(ConsumerStatusName)}
    assert shown <= set(TONES)


def test_only_failures_are_red() -> None:
    assert {state for state, tone in TONES.items() if tone == "failure"} == {
        "failed",
        "crashed",
        "dead",
    }
    for waiting in (REQUEUED, "snoozed", "rate_limited", "pending", "paused"):
        assert tone_of(waiting) == "waiting"
    assert tone_of("something-new") == "neutral"


def test_a_requeues_note_is_not_shown_as_an_error() -> None:
    assert error_class(REQUEUED) == "note-text"
    assert error_class("snoozed") == "note-text"
    assert error_class("failed") == "error-text"
    assert error_class("retrying") == "error-text"


def test_the_stylesheet_gives_the_failure_tone_the_error_colour_and_waiting_another() -> None:
    failure, waiting = _rule(".tone-failure"), _rule(".tone-waiting")
    assert "#fadbd7" in failure
    assert "#fadbd7" not in waiting and "var(--bad)" not in waiting
    assert "var(--bad)" in _rule(".error-text")
    assert "var(--bad)" not in _rule(".note-text")
