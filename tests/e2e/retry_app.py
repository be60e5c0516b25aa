"""The application of the retry end-to-end test: a job that fails until a flag file exists
(``RETRY_APP_FLAG``, read by the worker process when the job runs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from asanoha.app import App
from asanoha.platform.model import Backoff, Feature

feature = Feature("retrying")


@feature.job("send", manual=True, retries=1, backoff=Backoff.fixed(0.1), timeout=20)
def send(payload: dict[str, Any], ctx: Any) -> None:
    """Fails while the flag file is missing, as a job whose mail server is down."""
    if not Path(os.environ["RETRY_APP_FLAG"]).exists():
        raise ConnectionError("the mail server did not answer")


app = App([feature])
