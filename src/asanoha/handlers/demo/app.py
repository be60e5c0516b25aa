"""The demo ``App``, configured from ``ASANOHA_*`` environment variables."""

from asanoha import App
from asanoha.handlers.demo.features import notes

app = App([notes])
