"""Read-your-writes over HTTP: a write's answer carries the primary's log position, and the
caller's next query hands it back so that a read replica serves it only once it has
replayed that write (see ``store.replica``)."""

from __future__ import annotations

import logging
import math

from starlette.requests import Request
from starlette.responses import Response

from asanoha.platform.errors import Reasons, ValidationError
from asanoha.platform.service import Service
from asanoha.platform.store.replica import PRIMARY_ONLY, ReadAfter, valid_position

log = logging.getLogger("asanoha.http")

#: The response header of a write, and the request header of a query: the write's position.
READ_AFTER_HEADER = "Asanoha-Read-After"
#: The same position as a cookie, for browsers (the header wins when both are sent).
READ_AFTER_COOKIE = "asanoha_read_after"


def read_after_of(request: Request) -> ReadAfter:
    """The position the caller's query must see, from the header or the cookie; 400
    ``read_after_invalid`` when it is no log position."""
    position = request.headers.get(READ_AFTER_HEADER)
    source = READ_AFTER_HEADER
    if position is None:
        position = request.cookies.get(READ_AFTER_COOKIE)
        source = READ_AFTER_COOKIE
    if position is None:
        return ReadAfter()
    if not valid_position(position):
        raise ValidationError(Reasons.READ_AFTER_INVALID, field=source, value=position[:40])
    return ReadAfter(position)


def note_write(request: Request, service: Service) -> None:
    """Keep the primary's position after the caller's write for its answer (a round trip,
    made only when the application has a read replica).

    Never raises: the write has committed, and answering it as failed would have the caller
    repeat it. When the position cannot be read, the answer carries ``PRIMARY_ONLY`` so the
    caller's next reads go to the primary instead of a standby that may lack the write."""
    try:
        position = service.commit_position()
    except Exception as error:
        log.warning(
            "reading the commit position after a write failed (%s); the writer reads the "
            "primary for now",
            type(error).__name__,
        )
        position = PRIMARY_ONLY
    if position is not None:
        request.state.read_after = position


def mark_read_after(request: Request, response: Response, max_lag: float) -> Response:
    """The header and cookie of a write's position on its answer. The cookie lives as long
    as the replica may lag: later, a replica that lacks the write is bypassed anyway."""
    position = getattr(request.state, "read_after", None)
    if isinstance(position, str):
        response.headers[READ_AFTER_HEADER] = position
        response.set_cookie(
            READ_AFTER_COOKIE,
            position,
            max_age=math.ceil(max_lag) + 1,
            httponly=True,
            samesite="lax",
        )
    return response
