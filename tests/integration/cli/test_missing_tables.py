"""A command run on a database nobody migrated says to run ``asanoha migrate``, in one line,
and exits 1: on Postgres (undefined table) and on SQLite (no such table) alike."""

from __future__ import annotations

import pytest

from tests.integration.cli.conftest import Project

SHOP_WITH_JOB = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="shop_notes", fields={"text": fields.text(personal=False, reason="fixture")})
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))


@feature.job("ping", manual=True)
def ping(payload, ctx):
    return None


app = App([feature])
"""

#: Commands that read or write the platform's tables, each with the arguments it needs.
COMMANDS = [
    ("jobs", "failed"),
    ("jobs", "pending"),
    ("jobs", "runs"),
    ("jobs", "pause", "shop:job:ping"),
    ("jobs", "pauses"),
    ("jobs", "run", "shop:job:ping"),
    ("projections", "rebuild", "shop:note"),
    ("consumers", "status"),
]


@pytest.mark.parametrize("project", ["postgres", "sqlite"], indirect=True)
def test_a_command_on_a_database_without_the_platform_tables_says_to_migrate(
    project: Project,
) -> None:
    (project.folder / "shop.py").write_text(SHOP_WITH_JOB, encoding="utf-8")
    for command in COMMANDS:
        done = project.run(*command, "--app", "shop:app")
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert done.stderr.strip().splitlines() == [
            "error: the database has no asanoha tables: run asanoha migrate."
        ], command
