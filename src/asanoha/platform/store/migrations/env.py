"""Alembic environment of the platform's own tables (run by ``asanoha migrate``)."""

from asanoha.platform.store.migrations import run_env

run_env()
