"""An application for the command tests: one entity with CRUD and a high-risk handler."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from asanoha import Access, Agent, App, Entity, Feature, WriteContext, fields
from asanoha.platform.settings import Settings

SECRET = "cli-test-secret-0123456789abcdef0123"
ADMIN = Access(roles=["Admin"])

note = Entity(
    table="cli_notes",
    fields={"text": fields.text(required=True, personal=False, reason="fixture")},
)
notes = Feature("notes")
notes.crud("note", note, write=ADMIN, read=ADMIN, descriptions={"create": "Write a note."})


class Wipe(BaseModel):
    reason: str


@notes.write_handler("wipe", access=ADMIN, agent=Agent(risk="high"), description="Wipe notes.")
def wipe(payload: Wipe, ctx: WriteContext) -> Any:
    return None


app = App([notes], Settings(database_url="sqlite+pysqlite:///:memory:", jwt_secret=SECRET))
#: The same features on the placeholder secret (ASANOHA_JWT_SECRET unset).
placeholder_app = App([notes], Settings(database_url="sqlite+pysqlite:///:memory:"))
#: The placeholder secret in development (ASANOHA_DEVELOPMENT=true).
development_app = App(
    [notes], Settings(database_url="sqlite+pysqlite:///:memory:", development=True)
)
