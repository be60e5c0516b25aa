"""``asanoha console``: the operator console alone, without the API."""

from __future__ import annotations

from typing import Annotated

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.embedded import announce_development_token, use_process_secret
from asanoha.cli.schema_gate import require_current_schema
from asanoha.cli.signing import refuse_insecure_signing


def console(
    app: AppOption,
    host: str = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the console.")] = 8001,
    root_path: Annotated[
        str,
        typer.Option(help="The path prefix under which a proxy serves the console."),
    ] = "",
) -> None:
    """Serve the operator console (``/console``) alone, with uvicorn.

    Principals with the SystemAdmin role sign in with a token, as for the API (the same
    ASANOHA_JWT_SECRET); the pages read and act through the bundled job-admin and
    consumer-admin handlers, so add job_admin.feature and consumer_admin.feature to the
    app. asanoha serve serves the same console at /console next to the API. Refuses a
    database whose schema is behind, and the signing settings serve refuses.
    """
    import uvicorn

    from asanoha.console import build_console_app

    loaded = load_app(app)
    minted = use_process_secret(loaded)
    refuse_insecure_signing(loaded)
    require_current_schema(loaded, app)
    if minted:
        announce_development_token(loaded)
    typer.echo(f"Operator console: http://{host}:{port}{root_path}/console", err=True)
    uvicorn.run(build_console_app(loaded), host=host, port=port, root_path=root_path)
