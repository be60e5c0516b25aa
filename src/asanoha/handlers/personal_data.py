"""Personal data handlers for system administrators: forget a subject (erase its data key),
and export every personal value held for a subject. Add ``personal_data.feature`` to an
application's features to expose them (over HTTP and to agents).

A subject is what a personal field's stance names: a row's id (``personal="self"``, or the
row another field refers to) or ``$tenant``. They act on the caller's tenant only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from asanoha.handlers.consumer_admin import SYSTEM_ADMIN_ROLE
from asanoha.platform.model import Access, Agent, Feature
from asanoha.platform.personal.export import export_subject
from asanoha.platform.personal.subject_keys import INDEX_SUBJECT
from asanoha.platform.service import QueryContext, WriteContext
from asanoha.platform.service.erasure import forget_subject
from asanoha.platform.service.handler_context import platform_registry, platform_request
from asanoha.platform.service.validation import invalid_field

SYSTEM_ADMINS = Access(roles=[SYSTEM_ADMIN_ROLE])
#: The stream type of the forget events (one stream per subject).
SUBJECT_STREAM_TYPE = "personal-data:subject"

feature = Feature("personal-data")


class Subject(BaseModel):
    """Whose data: a subject id (a row id, or ``$tenant``)."""

    subject: str = Field(min_length=1, max_length=56)


class ForgetSubject(Subject):
    """Why the subject is forgotten (kept with its tombstone and in the event)."""

    reason: str = Field(min_length=1, max_length=500)


class SubjectForgotten(BaseModel):
    """A subject's data key was destroyed: its personal values read as forgotten."""

    subject: str
    reason: str


subject_forgotten = feature.event("subject-forgotten", SubjectForgotten)


def _checked(subject: str, handler_qn: str) -> str:
    if subject == INDEX_SUBJECT:
        raise invalid_field(
            handler_qn, "subject", "not_a_subject", f"{INDEX_SUBJECT} is no subject"
        )
    return subject


@feature.write_handler(
    "forget-subject",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="high"),
    description=(
        "Forget a subject: destroy its data key, so that every personal value of it (in rows, "
        "events, job rows, results and backups) reads as [forgotten] from now on. Irreversible."
    ),
)
def forget(payload: ForgetSubject, ctx: WriteContext) -> dict[str, Any]:
    """Destroy the subject's data key in the caller's tenant and record why."""
    request = platform_request(ctx)
    forget_subject(
        request,
        ctx._service.personal,
        tenant_id=ctx.tenant_id,
        subject=_checked(payload.subject, ctx.handler.qn),
        by=ctx.user.id,
        reason=payload.reason,
    )
    stored = ctx.append_event(
        subject_forgotten,
        {"subject": payload.subject, "reason": payload.reason},
        stream_id=f"subject:{payload.subject}",
        stream_type=SUBJECT_STREAM_TYPE,
    )
    return {"subject": payload.subject, "forgotten": True, "event": stored.id}


@feature.query_handler(
    "export-subject",
    access=SYSTEM_ADMINS,
    agent=Agent(risk="high"),
    description=(
        "Every personal value held for a subject (entity rows, events, job rows), each with "
        "the table, row id and path where it was found: the access right of GDPR Art. 15."
    ),
)
def export(payload: Subject, ctx: QueryContext) -> dict[str, Any]:
    """The subject's personal values in the caller's tenant."""
    request = platform_request(ctx)
    service = ctx._service
    found = export_subject(
        request.conn,
        service.personal.vault(request.conn),
        service.tables,
        platform_registry(ctx),
        ctx.tenant_id,
        _checked(payload.subject, ctx.handler.qn),
    )
    return {"subject": payload.subject, "values": found}
