"""The application ``asanoha worker --app _workflow_app:app`` runs in ``bench/workflows.py``
(settings from the ``ASANOHA_*`` environment it sets). The job whose starts are stamped comes
from ``BENCH_FIRST_JOB`` (the workflow's first step by default), the one whose ends are
stamped from ``BENCH_JOB`` (its fan-in step by default)."""

from __future__ import annotations

import os

from _stamps import stamp_task_ends, stamp_task_starts
from _workflow_jobs import FAN_IN, FIRST_STEP, feature
from asanoha import App

app = App(features=[feature])
stamp_task_starts(os.environ.get("BENCH_FIRST_JOB", FIRST_STEP))
stamp_task_ends(os.environ.get("BENCH_JOB", FAN_IN))
