"""The application of the Flower test of deliveries that run nothing (settings from
``ASANOHA_*``)."""

from __future__ import annotations

from typing import Any

from asanoha.app import App
from asanoha.platform.model import Feature

feature = Feature("shop")


@feature.job("sync-stock", manual=True, timeout=20)
def sync_stock(payload: dict[str, Any], ctx: Any) -> None:
    ctx.log.info("stock synced")


app = App([feature])
