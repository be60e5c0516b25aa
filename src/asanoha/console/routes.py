"""The console's pages and actions, as Starlette routes under ``/console``.

Pages are GET and change nothing; actions are POST forms that carry the session's CSRF token
and answer with a redirect to the page (post/redirect/get), the outcome in its query string.
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from asanoha.console import calls
from asanoha.console.charts import lag_chart, throughput_chart
from asanoha.console.forms import bounded, form_text, json_field
from asanoha.console.live import live_stream
from asanoha.console.outcomes import error_text, notice_text
from asanoha.console.pauses import pause_rows
from asanoha.console.provider_login import FLOW_COOKIE, FLOW_SECONDS, ProviderLogin
from asanoha.console.session import (
    CONSOLE_ROLE,
    CSRF_FIELD,
    Session,
    current_session,
    end_session,
    has_valid_csrf,
    has_valid_login_nonce,
    keep_login_nonce,
    login_nonce,
    revoke_session_token,
    signed_in_user,
    start_session,
)
from asanoha.console.tones import error_class, tone_of
from asanoha.console.writes import OUTCOMES, write_counts
from asanoha.platform.errors import AsanohaError, PayloadTooLargeError, Reasons, ValidationError
from asanoha.platform.http.read_after import mark_read_after
from asanoha.platform.http.request_ids import RequestIdMiddleware
from asanoha.platform.http.stream import build_feed_hub, feed_of

if TYPE_CHECKING:
    from fastapi import FastAPI

    from asanoha.platform.feed import FeedHub
    from asanoha.platform.http.parts import HttpParts

#: Where the console is served.
CONSOLE_PATH = "/console"
#: The states of a job row, in the order the pages show them.
JOB_STATES = ("pending", "running", "succeeded", "failed", "cancelled")
#: The consumer operations the Consumers page offers (``consumer-admin:write:<name>``).
CONSUMER_ACTIONS = ("restart", "skip", "disable", "enable")
#: What a job's or a run's page offers (``job-admin:write:<name>``, ``workflow-admin:...``).
ROW_ACTIONS = ("retry", "cancel")
#: The states a run listing filters by.
RUN_STATES = ("running", "succeeded", "failed", "cancelled")
#: The pause operations the Jobs page offers for a job or a lane (``job-admin:write:<name>``).
PAUSE_ACTIONS = ("pause", "resume")
#: How many rows the jobs table shows at most.
JOB_ROWS = (50, 100, 200, 500)
#: Headers of every console answer: only the console's own script runs (no inline script),
#: it connects to the console alone (the live feed, the pages it reloads), nothing is framed
#: or cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
        "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
HERE = Path(__file__).parent
Page = Callable[[Request, Session], Awaitable[Response]]


class Console:
    """The console of one application: its templates, the routes that render them, and the
    live feed its pages follow."""

    def __init__(self, parts: HttpParts, feed: FeedHub) -> None:
        self.parts = parts
        self.feed = feed
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["when"] = _when
        self.templates.filters["tone"] = tone_of
        self.templates.filters["error_class"] = error_class

    def routes(self) -> list[BaseRoute]:
        """Every page, action and asset, at their full paths under ``/console``."""
        path = CONSOLE_PATH
        return [
            Route(path, self.home, methods=["GET"]),
            Route(f"{path}/login", self.login_form, methods=["GET"]),
            Route(f"{path}/login", self.login, methods=["POST"]),
            Route(f"{path}/login/provider", self.provider_login, methods=["GET"]),
            Route(f"{path}/login/provider/back", self.provider_back, methods=["GET"]),
            Route(f"{path}/logout", self.action(self.logout), methods=["POST"]),
            Route(f"{path}/jobs", self.page(self.jobs), methods=["GET"]),
            Route(f"{path}/jobs/run", self.action(self.run_job), methods=["POST"]),
            Route(f"{path}/jobs/{{id:uuid}}", self.page(self.job), methods=["GET"]),
            Route(
                f"{path}/jobs/{{id:uuid}}/{{operation}}",
                self.action(self.job_operation),
                methods=["POST"],
            ),
            Route(
                f"{path}/pauses/{{operation}}", self.action(self.pause_operation), methods=["POST"]
            ),
            Route(f"{path}/workflows", self.page(self.workflows), methods=["GET"]),
            Route(f"{path}/workflows/{{id:uuid}}", self.page(self.workflow), methods=["GET"]),
            Route(
                f"{path}/workflows/{{id:uuid}}/{{operation}}",
                self.action(self.workflow_operation),
                methods=["POST"],
            ),
            Route(f"{path}/consumers", self.page(self.consumers), methods=["GET"]),
            Route(
                f"{path}/consumers/{{operation}}",
                self.action(self.consumer_operation),
                methods=["POST"],
            ),
            Route(f"{path}/projections", self.page(self.projections), methods=["GET"]),
            Route(f"{path}/writes", self.page(self.writes), methods=["GET"]),
            Route(f"{path}/tokens", self.page(self.tokens), methods=["GET"]),
            Route(f"{path}/tokens/revoke", self.action(self.revoke_token), methods=["POST"]),
            Route(f"{path}/settings", self.page(self.settings), methods=["GET"]),
            Route(f"{path}/settings/config", self.action(self.set_config), methods=["POST"]),
            Route(f"{path}/settings/secret", self.action(self.set_secret), methods=["POST"]),
            Route(f"{path}/live", self.live, methods=["GET"]),
            Mount(f"{path}/static", StaticFiles(directory=HERE / "static")),
        ]

    # -- sessions -------------------------------------------------------------------------

    async def session_of(self, request: Request) -> Session | None:
        """The request's session, its token checked in a worker thread when checking may
        wait on the identity provider or the database (never on the event loop)."""
        if self.parts.tokens.may_block:
            return await run_in_threadpool(current_session, self.parts.tokens, request)
        return current_session(self.parts.tokens, request)

    def page(self, render: Page) -> Callable[[Request], Awaitable[Response]]:
        """A GET page: without a session, a redirect to the login."""

        async def endpoint(request: Request) -> Response:
            session = await self.session_of(request)
            if session is None:
                return self.to_login(request)
            return await render(request, session)

        return endpoint

    def action(self, act: Page) -> Callable[[Request], Awaitable[Response]]:
        """A POST action: without a session a redirect to the login; without the session's
        CSRF token 403, and nothing is done."""

        async def endpoint(request: Request) -> Response:
            session = await self.session_of(request)
            if session is None:
                return self.to_login(request)
            try:
                request = await bounded(request, self.parts.settings)
            except PayloadTooLargeError as error:
                return self.too_large(request, error)
            form = await request.form()
            if not has_valid_csrf(session, form.get(CSRF_FIELD)):
                return self.render(
                    request,
                    "refused.html",
                    status_code=403,
                    session=None,
                    title="Refused",
                    reason="The form did not carry this session's CSRF token: reload the page "
                    "and try again.",
                )
            response = await act(request, session)
            # Its write's position: the pages that follow read what it did.
            return mark_read_after(request, response, self.parts.settings.replica_max_lag)

        return endpoint

    def too_large(self, request: Request, error: PayloadTooLargeError) -> Response:
        """413: the form is larger than a request body may be; nothing was read or done."""
        return self.render(
            request,
            "refused.html",
            status_code=error.http_status,
            session=None,
            title="Refused",
            reason=f"{error.http_status} {error.reason}: {error.message}",
        )

    async def live(self, request: Request) -> Response:
        """The feed the pages' script follows; 401 without a session (``EventSource`` gives
        up on it, and the page shows it is no longer live)."""
        session = await self.session_of(request)
        if session is None:
            return PlainTextResponse("no console session", status_code=401)
        return await live_stream(
            request, session, self.feed, heartbeat=self.parts.settings.stream_heartbeat
        )

    def to_login(self, request: Request) -> Response:
        """Redirect to the login page."""
        return RedirectResponse(f"{base_of(request)}/login", status_code=303)

    async def home(self, request: Request) -> Response:
        """``/console``: the Jobs page."""
        return RedirectResponse(f"{base_of(request)}/jobs", status_code=303)

    async def login_form(self, request: Request) -> Response:
        """The login page (the Jobs page when already signed in)."""
        if await self.session_of(request) is not None:
            return RedirectResponse(f"{base_of(request)}/jobs", status_code=303)
        return self.login_page(request)

    def login_page(self, request: Request, problem: str | None = None) -> Response:
        """The login form, with ``problem`` (401) when a token was refused."""
        nonce = login_nonce(request)
        response = self.render(
            request,
            "login.html",
            status_code=200 if problem is None else 401,
            session=None,
            title="Sign in",
            problem=problem,
            role=CONSOLE_ROLE,
            nonce=nonce,
            provider=ProviderLogin.of(self.parts.settings) is not None,
        )
        keep_login_nonce(response, request, nonce, cookie_path(request))
        return response

    async def login(self, request: Request) -> Response:
        """Check the token (as the API checks a bearer token) and start the session."""
        try:
            request = await bounded(request, self.parts.settings)
        except PayloadTooLargeError as error:
            return self.too_large(request, error)
        form = await request.form()
        if not has_valid_login_nonce(request, form.get("nonce")):
            return self.render(
                request,
                "refused.html",
                status_code=403,
                session=None,
                title="Refused",
                reason="The login form is stale or was sent from another page: reload it.",
            )
        token = form_text(form, "token").strip()
        try:
            signed_in_user(self.parts.tokens, token)
        except AsanohaError as error:
            if error.reason == Reasons.ROLE_REQUIRED:
                return self.login_page(request, f"This token lacks the {CONSOLE_ROLE} role.")
            return self.login_page(request, f"The token was refused: {error.message}")
        response = RedirectResponse(f"{base_of(request)}/jobs", status_code=303)
        start_session(response, request, token, cookie_path(request), self.parts.settings)
        return response

    async def provider_login(self, request: Request) -> Response:
        """Send the browser to the identity provider (authorization code flow, PKCE)."""
        provider = ProviderLogin.of(self.parts.settings)
        if provider is None:
            return self.to_login(request)
        try:
            url, flow = await run_in_threadpool(provider.start, _provider_back_url(request))
        except (OSError, ValueError):
            return self.login_page(request, "The identity provider cannot be reached.")
        response = RedirectResponse(url, status_code=303)
        # Lax, not Strict: the provider's redirect back is a navigation from its site.
        response.set_cookie(
            FLOW_COOKIE, flow, max_age=FLOW_SECONDS, path=cookie_path(request), httponly=True,
            samesite="lax", secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    async def provider_back(self, request: Request) -> Response:
        """The provider's redirect back: exchange the code and start the session."""
        provider = ProviderLogin.of(self.parts.settings)
        if provider is None:
            return self.to_login(request)
        params = request.query_params
        try:
            token = await run_in_threadpool(
                provider.finish,
                request.cookies.get(FLOW_COOKIE),
                params.get("state"),
                params.get("code"),
                _provider_back_url(request),
            )
            await run_in_threadpool(signed_in_user, self.parts.tokens, token)
        except AsanohaError as error:
            if error.reason == Reasons.ROLE_REQUIRED:
                return self.login_page(request, f"This account lacks the {CONSOLE_ROLE} role.")
            return self.login_page(request, "The identity provider's token was refused.")
        except (OSError, ValueError):
            return self.login_page(request, "The sign-in at the identity provider failed.")
        # A page of this site moves on: the Strict session cookie is not sent on a redirect
        # chain that a navigation from the provider's site started.
        target = html.escape(f"{base_of(request)}/jobs")
        response = HTMLResponse(
            f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
            f'<a href="{target}">Continue</a>'
        )
        start_session(response, request, token, cookie_path(request), self.parts.settings)
        response.delete_cookie(FLOW_COOKIE, path=cookie_path(request))
        return response

    async def logout(self, request: Request, session: Session) -> Response:
        """End the session and revoke its token: a copy of the cookie replayed later is
        refused by the console and the API alike."""
        await run_in_threadpool(revoke_session_token, self.parts.tokens, session)
        response = RedirectResponse(f"{base_of(request)}/login?notice=signed-out", status_code=303)
        end_session(response, cookie_path(request))
        return response

    # -- jobs -----------------------------------------------------------------------------

    async def jobs(self, request: Request, session: Session) -> Response:
        """Counts by job, lane and state, throughput of the last hour, and the job rows."""
        params = request.query_params
        wanted = {
            "state": params.get("state") or None,
            "job": params.get("job") or None,
            "limit": _limit(params.get("limit")),
        }
        service = self.parts.service
        summary = await calls.query(service, request, session.user, "job-admin:query:summary", {})
        rows = await calls.query(
            service,
            request,
            session.user,
            "job-admin:query:jobs",
            {key: value for key, value in wanted.items() if value is not None},
        )
        pauses = await calls.query(service, request, session.user, "job-admin:query:pauses", {})
        missing = _missing_feature(summary, rows, pauses)
        counts: dict[tuple[str, str | None], dict[str, int]] = {}
        for count in summary.data["counts"] if summary.ok else []:
            states = counts.setdefault((count["job"], count["lane"]), dict.fromkeys(JOB_STATES, 0))
            states[count["state"]] = count["count"]
        known = sorted({job.qn for job in self.parts.registry.jobs} | {job for job, _ in counts})
        return self.render(
            request,
            "jobs.html",
            session=session,
            title="Jobs",
            active="jobs",
            live="jobs",
            missing=missing,
            problem=_problem(summary, rows, pauses) if missing is None else None,
            counts=sorted(counts.items(), key=lambda item: item[0][0]),
            states=JOB_STATES,
            chart=throughput_chart(summary.data["throughput"] if summary.ok else []),
            rows=rows.data if rows.ok else [],
            wanted=wanted,
            limits=JOB_ROWS,
            known_jobs=known,
            # The run form offers what ``job-admin:write:run`` takes: jobs declared manual.
            manual_jobs=sorted(job.qn for job in self.parts.registry.jobs if job.manual),
            pauses=pause_rows(self.parts.registry, pauses.data if pauses.ok else None),
            held=pauses.data["held"] if pauses.ok else {},
            is_operator=self.is_operator(session),
        )

    async def job(self, request: Request, session: Session) -> Response:
        """One job row with every attempt: times, outcome, error and the lines it logged."""
        job_id = str(request.path_params["id"])
        service = self.parts.service
        rows = await calls.query(
            service, request, session.user, "job-admin:query:jobs", {"id": job_id}
        )
        runs = await calls.query(
            service, request, session.user, "job-admin:query:runs", {"id": job_id, "limit": 500}
        )
        pauses = await calls.query(service, request, session.user, "job-admin:query:pauses", {})
        missing = _missing_feature(rows, runs, pauses)
        if missing is None and rows.ok and not rows.data:
            return self.render(
                request,
                "refused.html",
                status_code=404,
                session=session,
                title="No such job",
                reason=f"This tenant has no job {job_id}.",
            )
        return self.render(
            request,
            "job.html",
            session=session,
            title="Job",
            active="jobs",
            live="jobs",
            live_job=job_id,
            missing=missing,
            problem=_problem(rows, runs, pauses) if missing is None else None,
            row=rows.data[0] if rows.ok and rows.data else None,
            held=pauses.data["held"] if pauses.ok else {},
            is_operator=self.is_operator(session),
            # Oldest first: the attempts in the order they ran.
            runs=list(reversed(runs.data)) if runs.ok else [],
        )

    async def job_operation(self, request: Request, session: Session) -> Response:
        """Retry or cancel a job through ``job-admin:write:retry`` / ``cancel``."""
        return await self.row_operation(request, session, "jobs", "job-admin", "job")

    async def row_operation(
        self, request: Request, session: Session, page: str, feature: str, noun: str
    ) -> Response:
        """``retry`` or ``cancel`` (the path's operation) of the row the path names, through
        ``<feature>:write:<operation>``; back to the row's page with what happened."""
        row_id = str(request.path_params["id"])
        operation = request.path_params["operation"]
        back = f"{base_of(request)}/{page}/{row_id}"
        if operation not in ROW_ACTIONS:
            return _back(back, error="unknown-operation")
        answer = await calls.write(
            self.parts.service,
            request,
            session.user,
            f"{feature}:write:{operation}",
            {"id": row_id},
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        done = "retried" if operation == "retry" else "cancelled"
        return _back(back, notice=f"{noun}-{done}")

    # -- workflows ------------------------------------------------------------------------

    async def workflows(self, request: Request, session: Session) -> Response:
        """The newest runs, by state and workflow."""
        params = request.query_params
        wanted = {
            "state": params.get("state") if params.get("state") in RUN_STATES else None,
            "workflow": params.get("workflow") or None,
            "limit": _limit(params.get("limit")),
        }
        runs = await calls.query(
            self.parts.service,
            request,
            session.user,
            "workflow-admin:query:runs",
            {key: value for key, value in wanted.items() if value is not None},
        )
        missing = _missing_feature(runs)
        return self.render(
            request,
            "workflows.html",
            session=session,
            title="Workflows",
            active="workflows",
            # A run moves as its steps' job rows do.
            live="jobs",
            missing=missing,
            problem=_problem(runs) if missing is None else None,
            runs=runs.data if runs.ok else [],
            wanted=wanted,
            states=RUN_STATES,
            limits=JOB_ROWS,
            known=sorted(workflow.qn for workflow in self.parts.registry.workflows),
        )

    async def workflow(self, request: Request, session: Session) -> Response:
        """One run: its steps in order, each with its state, attempts, result or error, and
        the job rows it ran as (each a link to its job page)."""
        run_id = str(request.path_params["id"])
        run = await calls.query(
            self.parts.service, request, session.user, "workflow-admin:query:get", {"id": run_id}
        )
        missing = _missing_feature(run)
        if run.error is not None and run.error.reason == Reasons.WORKFLOW_RUN_NOT_FOUND:
            return self.render(
                request,
                "refused.html",
                status_code=404,
                session=session,
                title="No such run",
                reason=f"This tenant has no workflow run {run_id}.",
            )
        return self.render(
            request,
            "workflow.html",
            session=session,
            title="Workflow run",
            active="workflows",
            live="jobs",
            missing=missing,
            problem=_problem(run) if missing is None else None,
            run=run.data if run.ok else None,
        )

    async def workflow_operation(self, request: Request, session: Session) -> Response:
        """Retry or cancel a run through ``workflow-admin:write:retry`` / ``cancel``, or
        approve the approval step the form names (``workflow-admin:write:approve``)."""
        if request.path_params["operation"] != "approve":
            return await self.row_operation(request, session, "workflows", "workflow-admin", "run")
        run_id = str(request.path_params["id"])
        form = await request.form()
        back = f"{base_of(request)}/workflows/{run_id}"
        answer = await calls.write(
            self.parts.service,
            request,
            session.user,
            "workflow-admin:write:approve",
            {"id": run_id, "step": form_text(form, "step")},
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice="step-approved")

    async def pause_operation(self, request: Request, session: Session) -> Response:
        """Pause or resume a job or a lane through ``job-admin:write:pause`` / ``resume``;
        back to the job's page when the form came from one, else to the Jobs page."""
        operation = request.path_params["operation"]
        form = await request.form()
        back = f"{base_of(request)}/jobs"
        job_id = _job_id(form_text(form, "id"))
        if job_id is not None:
            back = f"{back}/{job_id}"
        if operation not in PAUSE_ACTIONS:
            return _back(back, error="unknown-operation")
        answer = await calls.write(
            self.parts.service,
            request,
            session.user,
            f"job-admin:write:{operation}",
            {"target": form_text(form, "target")},
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice="paused" if operation == "pause" else "resumed")

    async def run_job(self, request: Request, session: Session) -> Response:
        """Run a job now (or after a delay) through ``job-admin:write:run``."""
        form = await request.form()
        back = f"{base_of(request)}/jobs"
        try:
            payload = json_field(form, "payload", self.parts.settings)
        except ValidationError as error:
            return _back(back, error=_message(calls.Answer(error=error)))
        call: dict[str, Any] = {"job": form_text(form, "job"), "payload": payload}
        if form_text(form, "delay"):
            call["delay"] = form_text(form, "delay")
        answer = await calls.write(
            self.parts.service, request, session.user, "job-admin:write:run", call
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(f"{back}/{answer.data['id']}", notice="job-enqueued")

    # -- consumers ------------------------------------------------------------------------

    async def consumers(self, request: Request, session: Session) -> Response:
        """Every consumer's position, lag, status, attempts, last error and stopping event."""
        data, refused = await self.listed(request, session, "consumer-admin:query:status")
        found = data or []
        return self.render(
            request,
            "consumers.html",
            session=session,
            title="Consumers",
            active="consumers",
            live="consumers",
            **refused,
            consumers=found,
            chart=lag_chart(found),
            is_operator=self.is_operator(session),
        )

    async def consumer_operation(self, request: Request, session: Session) -> Response:
        """Restart, skip, disable or enable a consumer (every partition, or the one the form
        names) through the consumer-admin handlers."""
        operation = request.path_params["operation"]
        back = f"{base_of(request)}/consumers"
        if operation not in CONSUMER_ACTIONS:
            return _back(back, error="unknown-operation")
        form = await request.form()
        call: dict[str, Any] = {"name": form_text(form, "name")}
        if form_text(form, "partition"):
            # Checked by the handler's payload model, as over the API.
            call["partition"] = form_text(form, "partition")
        answer = await calls.write(
            self.parts.service,
            request,
            session.user,
            f"consumer-admin:write:{operation}",
            call,
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice=f"consumer-{operation}")

    # -- projections ----------------------------------------------------------------------

    async def projections(self, request: Request, session: Session) -> Response:
        """Every declared projection: table, mode, events, and an async one's lag."""
        data, refused = await self.listed(request, session, "projection-admin:query:list")
        return self.render(
            request,
            "projections.html",
            session=session,
            title="Projections",
            active="projections",
            # An async projection moves as its consumer does.
            live="consumers",
            **refused,
            projections=data or [],
        )

    # -- writes ---------------------------------------------------------------------------

    async def writes(self, request: Request, session: Session) -> Response:
        """Writes per handler and outcome, and refusals by reason (operator tenant only)."""
        counts = await run_in_threadpool(write_counts) if self.is_operator(session) else None
        return self.render(
            request,
            "writes.html",
            session=session,
            title="Writes",
            active="writes",
            counts=counts,
            outcomes=OUTCOMES,
        )

    # -- personal access tokens -----------------------------------------------------------

    async def tokens(self, request: Request, session: Session) -> Response:
        """The personal access tokens of the principal (an Admin: of its tenant)."""
        data, refused = await self.listed(request, session, "tokens:query:list")
        return self.render(
            request,
            "tokens.html",
            session=session,
            title="Tokens",
            active="tokens",
            **refused,
            tokens=data or [],
        )

    async def revoke_token(self, request: Request, session: Session) -> Response:
        """Revoke a personal access token through ``tokens:write:revoke``."""
        back = f"{base_of(request)}/tokens"
        token_id = form_text(await request.form(), "id")
        answer = await calls.write(
            self.parts.service, request, session.user, "tokens:write:revoke", {"id": token_id}
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice="token-revoked")

    # -- settings -------------------------------------------------------------------------

    async def settings(self, request: Request, session: Session) -> Response:
        """The tenant's configuration, which secrets are set (never their values), which
        toggleable features are on, and each entity's retention policy."""
        data, refused = await self.listed(request, session, "config:query:list")
        found = data or {}
        return self.render(
            request,
            "settings.html",
            session=session,
            title="Settings",
            active="settings",
            **refused,
            config=found.get("config", []),
            secrets=found.get("secrets", []),
            switches=found.get("features", []),
            retention=[
                {
                    "entity": found.key,
                    "keep_for": str(found.entity.retention.keep_for),
                    "strategy": found.entity.retention.strategy,
                }
                for found in self.parts.registry.entities
                if found.entity.retention is not None
            ],
        )

    async def set_config(self, request: Request, session: Session) -> Response:
        """Set a configuration key for the session's tenant through ``config:write:set``;
        an empty value goes back to the default."""
        form = await request.form()
        back = f"{base_of(request)}/settings"
        sent = form_text(form, "value").strip()
        try:
            value = json_field(form, "value", self.parts.settings) if sent else None
        except ValidationError as error:
            return _back(back, error=_message(calls.Answer(error=error)))
        call = {
            "feature": form_text(form, "feature") or None,
            "key": form_text(form, "key"),
            "value": value,
        }
        answer = await calls.write(
            self.parts.service, request, session.user, "config:write:set", call
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice="config-set")

    async def set_secret(self, request: Request, session: Session) -> Response:
        """Set or remove a secret of the session's tenant through ``secrets:write:set``; the
        value goes no further than that call (the redirect names only the outcome)."""
        form = await request.form()
        back = f"{base_of(request)}/settings"
        remove = form_text(form, "remove") == "1"
        call = {
            "feature": form_text(form, "feature"),
            "name": form_text(form, "name"),
            "value": None if remove else form_text(form, "value"),
        }
        answer = await calls.write(
            self.parts.service, request, session.user, "secrets:write:set", call
        )
        if not answer.ok:
            return _back(back, error=_message(answer))
        return _back(back, notice="secret-removed" if remove else "secret-set")

    async def listed(
        self, request: Request, session: Session, qn: str
    ) -> tuple[Any, dict[str, Any]]:
        """What the query handler ``qn`` answers a page (``None`` when it refused), and what
        the page shows of a refusal: the bundled feature the application lacks
        (``missing``), else the error (``problem``)."""
        answer = await calls.query(self.parts.service, request, session.user, qn, {})
        missing = _missing_feature(answer)
        refused: dict[str, Any] = {
            "missing": missing,
            "problem": _problem(answer) if missing is None else None,
        }
        return (answer.data if answer.ok else None), refused

    def is_operator(self, session: Session) -> bool:
        """Whether the principal is in the operator tenant (``ASANOHA_OPERATOR_TENANT``)."""
        return session.user.tenant_id == self.parts.settings.operator_tenant

    # -- rendering ------------------------------------------------------------------------

    def render(
        self,
        request: Request,
        template: str,
        *,
        status_code: int = 200,
        **context: Any,
    ) -> Response:
        """The page ``template`` with ``context``, under the console's security headers."""
        context.setdefault("active", "")
        context.setdefault("missing", None)
        context.setdefault("problem", None)
        # The live feed topic the page follows (``static/live.js``), and its job row if one.
        context.setdefault("live", None)
        context.setdefault("live_job", None)
        page = self.templates.get_template(template).render(
            base=base_of(request),
            notice=notice_text(request.query_params.get("notice")),
            error=error_text(request.query_params.get("error")),
            csrf_field=CSRF_FIELD,
            **context,
        )
        return HTMLResponse(page, status_code=status_code, headers=SECURITY_HEADERS)


def base_of(request: Request) -> str:
    """The console's URL path as the browser sees it (behind a proxy's path prefix too)."""
    prefix = str(request.scope.get("root_path", ""))
    return prefix.rstrip("/") + CONSOLE_PATH


def _provider_back_url(request: Request) -> str:
    """Where the provider sends the browser back to (registered at the provider)."""
    return str(request.url.replace(path=f"{base_of(request)}/login/provider/back", query=""))


def cookie_path(request: Request) -> str:
    """The path the console's cookies are sent to: the console's pages only."""
    return base_of(request)


def console_routes(parts: HttpParts, feed: FeedHub | None = None) -> list[BaseRoute]:
    """The console's routes, at their full paths under ``/console``; its pages follow
    ``feed`` (none: a feed of its own, woken by the service's commits)."""
    return Console(parts, build_feed_hub(parts) if feed is None else feed).routes()


def mount_console(api: FastAPI, parts: HttpParts) -> FastAPI:
    """Add the console to the API app ``api`` (before it serves its first request); its
    pages follow the API's feed (one reader per process)."""
    api.router.routes.extend(console_routes(parts, feed_of(api)))
    return api


def build_console_app(parts: HttpParts) -> Starlette:
    """The console alone (``asanoha console``): its routes, ``/`` redirecting to it."""

    async def root(request: Request) -> Response:
        return RedirectResponse(base_of(request), status_code=303)

    console = Starlette(routes=[Route("/", root, methods=["GET"]), *console_routes(parts)])
    console.add_middleware(RequestIdMiddleware)
    return console


def _missing_feature(*answers: calls.Answer) -> str | None:
    """The bundled feature the application lacks, when a handler the page calls is unknown."""
    for answer in answers:
        error = answer.error
        if error is not None and error.reason == Reasons.HANDLER_NOT_FOUND:
            handler = str(error.details.get("handler", ""))
            name = (
                "consumer_admin.feature"
                if handler.startswith("consumer-admin:")
                else "token_admin.feature"
                if handler.startswith("tokens:")
                else "workflow_admin.feature"
                if handler.startswith("workflow-admin:")
                else "feature_config.features"
                if handler.startswith(("config:", "secrets:"))
                else "projection_admin.feature"
                if handler.startswith("projection-admin:")
                else "job_admin.feature"
            )
            return f"asanoha.handlers.{name}"
    return None


def _problem(*answers: calls.Answer) -> str | None:
    """The first error a handler answered, as the page shows it."""
    for answer in answers:
        error = answer.error
        if error is not None:
            # Rendered from the answer itself, never from the query string.
            return f"{error.http_status} {error.reason}: {error.message}"
    return None


def _message(answer: calls.Answer) -> str:
    """The key a refusal is shown under: its reason (the page shows the reason's text)."""
    error = answer.error
    assert error is not None
    return str(error.reason)


def _back(path: str, *, notice: str | None = None, error: str | None = None) -> Response:
    """Post/redirect/get: back to ``path``, with the outcome for the page to show."""
    outcome = {key: value for key, value in (("notice", notice), ("error", error)) if value}
    return RedirectResponse(f"{path}?{urlencode(outcome)}" if outcome else path, status_code=303)


def _job_id(sent: str) -> uuid.UUID | None:
    """The job row id a form names, when it is one (else ``None``)."""
    try:
        return uuid.UUID(sent) if sent else None
    except ValueError:
        return None


def _limit(sent: str | None) -> int:
    """The number of rows asked for: one of ``JOB_ROWS``, else the first."""
    # Compared as text: int() refuses some digits isdigit() accepts ("²") and long ones.
    return next((rows for rows in JOB_ROWS if sent == str(rows)), JOB_ROWS[0])


def _when(moment: str | None) -> str:
    """An ISO time as the pages show it: date and time to the second, UTC."""
    if not moment:
        return ""
    return moment.replace("T", " ")[:19]
