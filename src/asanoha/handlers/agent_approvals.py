"""The bundled ``agent`` feature: ``agent:write:approve``, a human's approval of one agent call.

Every application carries it: an agent principal's high-risk write runs only with a token it
mints (see ``platform/service/approvals.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection

from asanoha.platform.model import Access, Agent, Feature, SessionUser
from asanoha.platform.service import WriteContext
from asanoha.platform.service.approvals import MAX_APPROVAL_TTL, ApprovalRequest
from asanoha.platform.service.handler_context import platform_request

#: ``mint(conn, approver, request) -> {"approval_id", "token", ...}`` (``Approvals.mint``)
Mint = Callable[[Connection, SessionUser, ApprovalRequest], dict[str, Any]]

APPROVE_QN = "agent:write:approve"


class ApprovePayload(BaseModel):
    """The call a human approves, exactly as the agent will make it."""

    model_config = ConfigDict(extra="forbid")

    handler: str = Field(description="the QN of the high-risk write handler")
    payload: dict[str, Any] = Field(description="the payload the agent will send, unchanged")
    principal: str = Field(description="the agent principal's id (the 'sub' of its token)")
    channel: str = Field(
        default="api", max_length=64, description="where the human approved (web, chat, ...)"
    )
    agent_run: str | None = Field(default=None, max_length=200)
    tool_call: str | None = Field(default=None, max_length=200)
    ttl_seconds: int = Field(default=600, ge=1, le=MAX_APPROVAL_TTL)
    always: bool = Field(
        default=False, description="'always allow': refused for high-risk handlers"
    )


def agent_feature(mint: Mint) -> Feature:
    """A fresh ``agent`` feature whose handler records approvals through ``mint``."""
    feature = Feature("agent")

    @feature.write_handler(
        "approve",
        # The target handler's own rule decides who may approve (checked inside): whoever
        # approves must be allowed to make the call themselves, and be a human.
        access=Access(open_to_all="the approved handler's access rule is checked inside"),
        # Agents never see it as a tool; an agent principal calling it is refused.
        agent=Agent(risk="mid", expose=False),
        description="Approve one high-risk call by an agent: mints a single-use token.",
    )
    def approve(payload: ApprovePayload, ctx: WriteContext) -> dict[str, Any]:
        return mint(platform_request(ctx).conn, ctx.user, ApprovalRequest(**payload.model_dump()))

    return feature
