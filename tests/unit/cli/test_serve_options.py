"""``asanoha serve``'s server options reach uvicorn as its own settings."""

from __future__ import annotations

import uvicorn

from asanoha.cli.serve import LogLevel, server_options


def test_the_options_are_uvicorns_settings() -> None:
    options = server_options(LogLevel.WARNING, False, "10.0.0.1,10.0.0.2", "/api-v1")
    config = uvicorn.Config("asanoha.cli.serve:http_app_from_environment", **options)
    assert (config.log_level, config.proxy_headers, config.root_path) == (
        "warning",
        False,
        "/api-v1",
    )
    assert config.forwarded_allow_ips == "10.0.0.1,10.0.0.2"


def test_without_forwarded_allow_ips_uvicorns_default_holds() -> None:
    options = server_options(LogLevel.INFO, True, None, "")
    assert "forwarded_allow_ips" not in options
