"""The agent surface: an MCP server over the same tools, risks and gates as the HTTP API.

``platform`` holds what does not depend on MCP (annotations, approvals, provenance); this
package holds the transport glue built on the official MCP Python SDK.
"""

from asanoha.agents.mcp_callers import McpCallers
from asanoha.agents.mcp_server import (
    AGENT_RUN_META_KEY,
    APPROVAL_META_KEY,
    build_mcp_server,
)
from asanoha.platform.service.idempotency import IDEMPOTENCY_META_KEY

__all__ = [
    "AGENT_RUN_META_KEY",
    "APPROVAL_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "McpCallers",
    "build_mcp_server",
]
