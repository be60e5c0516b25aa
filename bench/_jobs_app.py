"""The application ``asanoha worker --app _jobs_app:app`` runs in
``bench/worker_throughput.py`` (settings from the ``ASANOHA_*`` environment it sets; the
job whose ends are stamped from ``BENCH_JOB``, the no-op job by default)."""

from __future__ import annotations

import os

from _stamps import stamp_task_ends
from _worker_jobs import NOOP, feature
from asanoha import App

app = App(features=[feature])
stamp_task_ends(os.environ.get("BENCH_JOB", NOOP))
