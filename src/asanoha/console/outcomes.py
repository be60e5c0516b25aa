"""What a console page says after an action: a fixed text for each key a redirect carries
in ``?notice=`` or ``?error=``. The query string only names a key, so a link crafted by
someone else can never make the console show words of its choosing."""

from __future__ import annotations

from asanoha.platform.errors import Reasons
from asanoha.platform.errors.messages import template

NOTICES = {
    "job-retried": "The job was put back to pending.",
    "job-cancelled": "The job was cancelled.",
    "job-enqueued": "The job was enqueued.",
    "paused": "Paused: its jobs wait, in every tenant, until it is resumed; running attempts "
    "run on.",
    "resumed": "Resumed: its waiting jobs are sent to the workers.",
    "run-retried": "The run runs again from where it stopped.",
    "run-cancelled": "The run was cancelled.",
    "step-approved": "The step is approved: the steps after it start.",
    "consumer-restart": "The consumer was restarted.",
    "consumer-skip": "The consumer skipped the event it was stopped at.",
    "consumer-disable": "The consumer was disabled.",
    "consumer-enable": "The consumer was enabled.",
    "token-revoked": "The token was revoked; it answers 401 token_revoked from now on.",
    "config-set": "The setting was saved for this tenant.",
    "secret-set": "The secret was saved, sealed; it is never shown again.",
    "secret-removed": "The secret was removed.",
    "signed-out": "You are signed out; the session's token is revoked.",
}

ERRORS = {
    "unknown-operation": "There is no such operation.",
}

_REASONS = frozenset(str(reason) for reason in Reasons)


def notice_text(key: str | None) -> str | None:
    """The text of a notice key; ``None`` for none or an unknown one."""
    return NOTICES.get(key) if key else None


def error_text(key: str | None) -> str | None:
    """The text of an error key: a console one, or a refusal's reason with its
    user-facing text; ``None`` for none or an unknown one."""
    if not key:
        return None
    if key in ERRORS:
        return ERRORS[key]
    if key in _REASONS:
        text, _ = template(key, "end_user", "en")
        return f"{key}: {text}"
    return None
