"""``/console/live``: the live feed (``platform/feed``) for the console's pages, as
Server-Sent Events, authenticated by the session cookie.

The feed's own ``/api/stream`` takes a bearer token; the console's cookie holds one, but it is
HttpOnly and sent to ``/console`` paths only, so a page's script can neither read it nor send
it to the API. This route subscribes the same hub as the session's principal instead: the
feed's access decides what it sees (its tenant's job events, as ``/api/stream`` would send
them to the same token), and the token's expiry ends the stream as it ends the API's.

A page asks for a topic, not for event types: ``jobs`` (every ``asanoha:job.*`` event, or one
job row's with ``job=<id>``) or ``consumers`` (every event the principal may read, since
consumers move as events are committed). The browser uses each message only as a signal to
reload the page's live regions (``static/live.js``); it does not resume from
``Last-Event-ID``, it reloads them whenever it (re)connects.
"""

from __future__ import annotations

import uuid

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from asanoha.console.session import Session
from asanoha.platform.feed import FeedFilter, FeedHub
from asanoha.platform.http.event_stream import EventStreamResponse
from asanoha.platform.jobs.job_events import JOB_STREAM_TYPE

#: What each topic follows: event-type patterns (none: every type the principal may read).
TOPICS: dict[str, tuple[str, ...]] = {
    # Progress, and the job's state events as the platform adds them: every ``asanoha:job.*``.
    "jobs": (f"{JOB_STREAM_TYPE}.*",),
    "consumers": (),
}


def live_filter(request: Request) -> FeedFilter | None:
    """The feed filter of the topic the request asks for; ``None``: no such topic."""
    params = request.query_params
    types = TOPICS.get(params.get("topic") or "")
    if types is None:
        return None
    job = params.get("job")
    if not job:
        return FeedFilter(types)
    try:
        # A job's events are on its row's stream (the row id).
        return FeedFilter(types, frozenset({str(uuid.UUID(job))}))
    except ValueError:
        return None


async def live_stream(
    request: Request, session: Session, hub: FeedHub, *, heartbeat: float
) -> Response:
    """The feed of ``session``'s principal, filtered by the request's topic (400: unknown)."""
    filter = live_filter(request)
    if filter is None:
        return PlainTextResponse(
            "topic: jobs (optionally with job=<id>) or consumers", status_code=400
        )
    user = session.user
    subscription = await hub.subscribe(
        user,
        filter,
        expires_at=None if user.token_expires is None else float(user.token_expires),
        heartbeat=heartbeat,
    )
    return EventStreamResponse(hub.messages(subscription), close=subscription.close)
