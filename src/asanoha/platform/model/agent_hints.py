"""MCP tool annotations derived from the resolved risk, and the define-time check that refuses
declared hints contradicting them.

One source: the resolved risk (``resolve_agent_exposure``) decides the gates, the approval
requirement and what agents are told. Nothing is declared twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.agent import Risk, resolve_agent_exposure

if TYPE_CHECKING:
    from asanoha.platform.model.handlers import HandlerDef

#: The namespaced ``_meta`` key of a tool and of results: risk, approval, trust.
META_KEY = "asanoha.dev/agent"

# Standard verbs whose repetition with the same arguments the platform refuses, so a retry
# changes nothing: update carries the version it read, delete and restore find the row already
# in the target state. Custom handlers promise nothing.
_IDEMPOTENT_VERBS = frozenset({"update", "delete", "restore"})


@dataclass(frozen=True)
class ToolHints:
    """What an agent is told about a handler."""

    risk: Risk
    read_only: bool
    destructive: bool
    #: ``True`` only where the platform can promise it, else ``None`` (not stated).
    idempotent: bool | None

    @property
    def approval_required(self) -> bool:
        """A high-risk write from an agent runs only with a human's approval token."""
        return self.risk == "high" and not self.read_only

    def annotations(self, title: str) -> dict[str, Any]:
        """MCP ``ToolAnnotations`` as JSON (camelCase keys)."""
        hints: dict[str, Any] = {"title": title, "readOnlyHint": self.read_only}
        if not self.read_only:
            # destructiveHint and idempotentHint mean something only for tools that write.
            hints["destructiveHint"] = self.destructive
            if self.idempotent is not None:
                hints["idempotentHint"] = self.idempotent
        return hints

    def meta(self) -> dict[str, Any]:
        """The tool's ``_meta`` entry: the risk, and whether a human must approve each call."""
        entry: dict[str, Any] = {"risk": self.risk}
        if self.approval_required:
            entry["approval"] = "approval required"
        return {META_KEY: entry}


def derive_tool_hints(handler: HandlerDef) -> ToolHints:
    """Queries (``low`` unless declared otherwise) are read-only; writes are additive (``mid``)
    or destructive (``high``).

    A write declared ``low`` is still a write: it is announced like ``mid``, never as
    read-only, since it changes state whatever its declared risk.
    """
    risk = resolve_agent_exposure(handler).risk
    if handler.kind == "query":
        return ToolHints(risk=risk, read_only=True, destructive=False, idempotent=None)
    verb = handler.crud.verb if handler.crud else None
    return ToolHints(
        risk=risk,
        read_only=False,
        destructive=risk == "high",
        idempotent=True if verb in _IDEMPOTENT_VERBS else None,
    )


def check_declared_hints(handler: HandlerDef) -> None:
    """Refuse declared agent hints that contradict what the handler does, naming it."""
    declared = handler.agent
    if declared is None:
        return
    _check_targets(handler, declared.targets)
    derived = derive_tool_hints(handler)
    for hint, value, why in (
        ("read_only", declared.read_only, _why_read_only(handler, derived)),
        ("destructive", declared.destructive, _why_destructive(handler, derived)),
        ("idempotent", declared.idempotent, _why_idempotent(derived)),
    ):
        expected = getattr(derived, hint)
        if value is not None and value != bool(expected):
            raise DefinitionError(
                f"{handler.qn} declares Agent({hint}={value!r}) but {why}. Remove the hint: "
                "the annotations are derived from the resolved risk"
            )


def _check_targets(handler: HandlerDef, targets: tuple[str, ...] | None) -> None:
    if targets is None:
        return
    if handler.kind != "write":
        raise DefinitionError(
            f"{handler.qn} declares Agent(targets=...) but it is a query: only a write's "
            "approval binds the rows it acts on. Remove targets="
        )
    unknown = sorted(set(targets) - set(handler.payload_model.model_fields))
    if unknown:
        raise DefinitionError(
            f"{handler.qn} declares Agent(targets={list(targets)!r}) but its payload model "
            f"{handler.payload_model.__name__} has no field {', '.join(unknown)}; name the "
            "payload fields that hold the ids of the rows it acts on"
        )


def _why_read_only(handler: HandlerDef, derived: ToolHints) -> str:
    if handler.kind == "query":
        return "it is a query, which cannot write"
    if derived.risk == "high":
        return "it resolves risk 'high' (it may reach an irreversible operation or rewrite instructions)"
    return "it is a write handler"


def _why_destructive(handler: HandlerDef, derived: ToolHints) -> str:
    if handler.kind == "query":
        return "it is a query, which cannot write"
    if derived.risk == "high":
        return "it resolves risk 'high', which agents are told is destructive"
    return f"it resolves risk {derived.risk!r}, which agents are told is additive"


def _why_idempotent(derived: ToolHints) -> str:
    if derived.idempotent:
        return "the platform refuses a repeat of this standard verb, so it is idempotent"
    return "the platform cannot promise that a repeated call changes nothing"
