"""The demo application: notes with an assistant instruction, and a job that indexes them."""

from asanoha.handlers.demo.features import notes

__all__ = ["notes"]
