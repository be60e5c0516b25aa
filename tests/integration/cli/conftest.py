"""Command tests: an application module in a scratch folder, run by the installed script."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from asanoha.testing.databases import TestDatabase

SHOP = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(
    table="shop_notes",
    fields={{
        "text": fields.text(personal=False, reason="fixture"),{extra}
    }},
)
feature = Feature("shop")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
app = App([feature])
"""
JWT_SECRET = secrets.token_urlsafe(32)
EXTRA_FIELD = '\n        "colour": fields.text(personal=False, reason="fixture"),'


def asanoha_script() -> str:
    """The installed ``asanoha`` script of this environment."""
    return str(Path(sys.executable).parent / "asanoha")


@dataclass
class Project:
    """A folder with ``shop.py`` and the database its settings point at."""

    folder: Path
    database: TestDatabase

    def write_shop(self, *, with_colour: bool = False) -> None:
        """(Re)write ``shop.py``; ``with_colour`` adds a field to the entity."""
        extra = EXTRA_FIELD if with_colour else ""
        (self.folder / "shop.py").write_text(SHOP.format(extra=extra), encoding="utf-8")

    def env(self, database: TestDatabase | None = None) -> dict[str, str]:
        """The environment of a command: this database (or ``database``), no other ASANOHA_
        settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ASANOHA_")}
        env.pop("PYTHONPATH", None)
        return {
            **env,
            "ASANOHA_DATABASE_URL": (database or self.database).url,
            # serve refuses the public placeholder secret.
            "ASANOHA_JWT_SECRET": JWT_SECRET,
            "COLUMNS": "200",
        }

    def run(
        self, *args: str, timeout: float = 60, database: TestDatabase | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``asanoha ARGS`` in the folder (on ``database`` instead of the project's)."""
        return subprocess.run(
            [asanoha_script(), *args],
            cwd=self.folder,
            env=self.env(database),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(params=["postgres"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    """A scratch project on an empty database."""
    database = TestDatabase.create(request.param, f"asanoha_cli_{uuid.uuid4().hex[:12]}")
    made = Project(tmp_path, database)
    made.write_shop()
    try:
        yield made
    finally:
        database.drop()


ProjectFactory = Callable[[], Project]
