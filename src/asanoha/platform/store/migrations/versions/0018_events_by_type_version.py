"""Events indexed by type and schema version: the boot check finds the lowest and highest
stored version of each event type from the index instead of reading the type's events.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_asanoha_events_type_schema_version", "asanoha_events", ["type", "schema_version"]
    )


def downgrade() -> None:
    op.drop_index("ix_asanoha_events_type_schema_version", table_name="asanoha_events")
