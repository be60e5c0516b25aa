"""The bench application as ``asanoha serve --app _apps:bench_app`` loads it (settings from
the ``ASANOHA_*`` environment the benchmark sets)."""

from __future__ import annotations

from _common import bench_feature
from asanoha import App

bench_app = App(features=[bench_feature()])
