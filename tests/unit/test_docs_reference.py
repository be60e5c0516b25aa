"""The documentation site's references are made from the code and miss nothing."""

from __future__ import annotations

from asanoha.cli import COMMANDS
from asanoha.cli.reference import cli_reference, command_tree
from asanoha.platform.settings import Settings
from asanoha.platform.settings_docs import setting_docs, settings_table


def test_every_setting_is_documented_in_its_source_and_in_the_table() -> None:
    docs = setting_docs()
    assert [doc.name for doc in docs] == list(Settings.model_fields)
    table = settings_table()
    for doc in docs:
        assert doc.meaning, f"settings.py: add a '#:' comment above {doc.name}"
        assert f"| `{doc.variable}` | `{doc.default}` |" in table
    assert table.count("\n") == len(docs) + 2


def test_every_command_and_subcommand_is_in_the_command_reference() -> None:
    reference = cli_reference()
    words = [" ".join(path) for path, _ in command_tree()]
    assert set(COMMANDS) <= set(words)
    assert "jobs retry" in words and "consumers status" in words
    for word in words:
        assert f"`asanoha {word}`" in reference
