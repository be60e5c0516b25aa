"""Commands are imported when they run: a worker's process holds nothing other commands use."""

from __future__ import annotations

import json
import subprocess
import sys

import typer

from asanoha.cli import COMMANDS, cli

#: What only the HTTP API, the MCP server or the terminal tables of other commands use.
NOT_IN_A_WORKER = ("fastapi", "starlette", "uvicorn", "mcp", "jwt", "httpx", "rich", "alembic")


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(output.splitlines()[-1]))


def test_resolving_the_worker_command_imports_no_other_command() -> None:
    loaded = modules_after(
        "from asanoha.cli import cli\n"
        "import typer\n"
        "root = typer.main.get_command(cli)\n"
        "assert root.get_command(None, 'worker') is not None\n"
    )
    others = {
        module for module in COMMANDS.values() if not module.startswith("asanoha.cli.worker:")
    }
    assert not {target.partition(":")[0] for target in others} & loaded
    assert not {name for name in loaded if name.split(".")[0] in NOT_IN_A_WORKER}


def test_every_registered_command_is_listed_in_order() -> None:
    root = typer.main.get_command(cli)
    assert root.list_commands(None) == list(COMMANDS)  # type: ignore[attr-defined]
