"""Agent hints: how risky a handler is, and whether agents see it as a tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from asanoha.platform.model.handlers import HandlerDef

Risk = Literal["low", "mid", "high"]
RISK_ORDER: dict[str, int] = {"low": 0, "mid": 1, "high": 2}


@dataclass(frozen=True)
class Agent:
    """Declared agent hints. ``risk=None`` takes the default of the handler kind.

    ``read_only``, ``destructive`` and ``idempotent`` are optional restatements of the MCP
    annotations. The annotations are always derived from the resolved risk; a restatement
    that contradicts the derivation is refused when the handler is defined.

    ``targets`` names the payload fields whose values are the ids of the rows (streams) a
    write acts on; a human's approval of an agent's call binds the version each row has when
    the human approves, so a row changed since invalidates the token. Default: the payload's
    ``id``; ``targets=()`` binds no row.
    """

    risk: Risk | None = None
    expose: bool | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    targets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.risk is not None and self.risk not in RISK_ORDER:
            raise ValueError(f"Agent(risk={self.risk!r}): risk must be 'low', 'mid' or 'high'")
        if self.targets is not None:
            # One name alone is one target, as in ``except``.
            names = (self.targets,) if isinstance(self.targets, str) else tuple(self.targets)
            if not all(isinstance(name, str) and name for name in names):
                raise ValueError(f"Agent(targets={self.targets!r}): targets are field names")
            object.__setattr__(self, "targets", names)

    @property
    def target_fields(self) -> tuple[str, ...]:
        """The payload fields naming the rows a write acts on (``id`` unless declared)."""
        return ("id",) if self.targets is None else self.targets


@dataclass(frozen=True)
class AgentExposure:
    """The effective hints of a handler."""

    risk: Risk
    expose: bool


def resolve_agent_exposure(handler: HandlerDef) -> AgentExposure:
    """The effective risk (declared, else ``low`` for queries, ``mid`` for writes) and exposure."""
    declared = handler.agent or Agent()
    risk: Risk = declared.risk or ("low" if handler.kind == "query" else "mid")
    expose = declared.expose if declared.expose is not None else bool(handler.description)
    return AgentExposure(risk=risk, expose=expose)


def is_below(risk: Risk, floor: Risk) -> bool:
    """Whether ``risk`` is lower than ``floor``."""
    return RISK_ORDER[risk] < RISK_ORDER[floor]
