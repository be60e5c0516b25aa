"""``asanoha tools``: the handlers an application exposes to agents, with their risks."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from asanoha.cli.app_loading import AppOption, load_app
from asanoha.cli.listings import print_json, print_table


def exposed_tools(reference: str) -> list[dict[str, Any]]:
    """Every exposed handler described as ``GET /api/agent/tools`` and the MCP server describe
    it (one listing, ``list_agent_tools``), for any caller."""
    from asanoha.platform.model.agent_tools import list_agent_tools

    return [tool.to_json() for tool in list_agent_tools(load_app(reference).registry)]


def tools(
    app: AppOption,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the tools as /api/agent/tools returns them.")
    ] = False,
) -> None:
    """List the agent tools of the application: name, kind, resolved risk, destructive hint.

    The API filters this list by the caller's roles; this command shows every exposed tool.
    """
    found = exposed_tools(app)
    if as_json:
        print_json({"tools": found})
        return
    print_table(
        ("tool", "kind", "risk", "destructive", "description"),
        (
            (
                tool["name"],
                tool["kind"],
                tool["risk"],
                "yes" if tool["annotations"].get("destructiveHint") else "no",
                tool["description"],
            )
            for tool in found
        ),
        no_wrap=("tool",),
    )
