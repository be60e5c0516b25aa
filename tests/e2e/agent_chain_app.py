"""The application of the agent-chain end-to-end test: mid-risk tools whose jobs forget rows
(``tests.integration.agents.chain_features``); settings from ``ASANOHA_*``."""

from __future__ import annotations

from asanoha.app import App
from tests.integration.agents.chain_features import chain

app = App([chain])
