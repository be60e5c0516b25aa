"""The application ``asanoha mcp --app tests.integration.agents.mcp_app:app`` serves in the
stdio test; its settings (database, token secret) come from the environment."""

from __future__ import annotations

from asanoha import App
from tests.integration.agents.features import assist

app = App([assist])
