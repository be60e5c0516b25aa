"""``asanoha keys``: master keys of personal data: make one, and re-wrap every data key under
the newest."""

from __future__ import annotations

import typer

from asanoha.cli.app_loading import AppOption, load_app

keys = typer.Typer(help="Master keys of personal data: generate, rotate.")


@keys.command()
def generate() -> None:
    """Print a new master key (base64 of 32 random bytes) for ASANOHA_MASTER_KEY."""
    from asanoha.platform.personal.master_keys import generate_master_key

    typer.echo(generate_master_key())


@keys.command()
def rotate(app: AppOption) -> None:
    """Re-wrap every data key under the first key of ASANOHA_MASTER_KEY; no ciphertext changes.

    To rotate: put the new key first in ASANOHA_MASTER_KEY and keep the old one after it
    (`new,old`) in every process, run `asanoha keys rotate`, then remove the old key.
    """
    from asanoha.platform.personal import subject_keys

    loaded = load_app(app)
    wrapper = loaded.service.personal.wrapper
    if wrapper is None:
        raise typer.BadParameter("ASANOHA_MASTER_KEY is not set: there is no key to rotate to")
    with loaded.database.begin() as conn:
        count = subject_keys.rotate(conn, loaded.service.tables, wrapper)
    typer.echo(f"re-wrapped {count} data key(s) under master key {wrapper.current_key_id}")
