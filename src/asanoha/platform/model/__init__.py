"""Definitions: fields, entities, features, handlers, access, agent hints and names."""

from asanoha.platform.model import fields
from asanoha.platform.model.access import Access
from asanoha.platform.model.agent import Agent, AgentExposure, Risk, resolve_agent_exposure
from asanoha.platform.model.aggregates import AggregateDef
from asanoha.platform.model.backoff import Backoff
from asanoha.platform.model.concurrency import Concurrency
from asanoha.platform.model.entity import Entity, instruction_fields
from asanoha.platform.model.feature import Feature
from asanoha.platform.model.handlers import (
    ConsumerDef,
    ConsumerStart,
    EntityDef,
    EventDef,
    HandlerDef,
    JobDef,
)
from asanoha.platform.model.job_outcomes import JobCancelled, Snooze
from asanoha.platform.model.names import make_qn, parse_qn, to_kebab
from asanoha.platform.model.rate_limit import RateLimit
from asanoha.platform.model.registry import Registry
from asanoha.platform.model.retention import Retention
from asanoha.platform.model.users import SYSTEM_ROLE, SessionUser

__all__ = [
    "SYSTEM_ROLE",
    "Access",
    "Agent",
    "AgentExposure",
    "AggregateDef",
    "Backoff",
    "Concurrency",
    "ConsumerDef",
    "ConsumerStart",
    "Entity",
    "EntityDef",
    "EventDef",
    "Feature",
    "HandlerDef",
    "JobCancelled",
    "JobDef",
    "RateLimit",
    "Registry",
    "Retention",
    "Risk",
    "SessionUser",
    "Snooze",
    "fields",
    "instruction_fields",
    "make_qn",
    "parse_qn",
    "resolve_agent_exposure",
    "to_kebab",
]
