"""The application ``asanoha worker --app _jobs_app:app`` runs in
``bench/worker_throughput.py`` (settings from the ``ASANOHA_*`` environment it sets)."""

from __future__ import annotations

from _stamps import stamp_task_ends
from _worker_jobs import NOOP, feature
from asanoha import App

app = App(features=[feature])
stamp_task_ends(NOOP)
