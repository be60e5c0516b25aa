"""``asanoha tools`` lists the agent tools with their resolved risks."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from asanoha.cli import cli

APP = "tests.unit.cli.apps:app"


def test_tools_as_json_match_the_api_description() -> None:
    result = CliRunner().invoke(cli, ["tools", "--app", APP, "--json"])
    assert result.exit_code == 0, result.output
    tools = {tool["name"]: tool for tool in json.loads(result.output)["tools"]}
    assert tools["notes:write:wipe"]["risk"] == "high"
    assert tools["notes:write:wipe"]["annotations"]["destructiveHint"] is True
    assert tools["notes:write:note:create"]["description"] == "Write a note."
    assert tools["notes:write:note:create"]["endpoint"] == "/api/write/notes:write:note:create"


def test_tools_table_shows_name_kind_risk_and_destructive_hint() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["tools", "--app", APP])
    assert result.exit_code == 0, result.output
    wipe = next(line for line in result.output.splitlines() if "notes:write:wipe" in line)
    assert [cell.strip() for cell in wipe.split("│")[1:5]] == [
        "notes:write:wipe",
        "write",
        "high",
        "yes",
    ]
