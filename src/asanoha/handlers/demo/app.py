"""The demo ``App``, configured from ``ASANOHA_*`` environment variables.

Without ``ASANOHA_JWT_SECRET`` it signs tokens with a random secret of this process (never
the public placeholder), so a served demo accepts only tokens it minted itself.
"""

from asanoha import App
from asanoha.handlers.demo.features import notes
from asanoha.platform.settings import Settings, with_process_secret

app = App([notes], with_process_secret(Settings()))
