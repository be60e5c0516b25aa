"""The waits of workflow runs: one row per wait step, marked by its matching event.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0029"
down_revision: str | Sequence[str] | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "asanoha_workflow_waits",
        sa.Column("run_id", sa.Uuid(), primary_key=True),
        sa.Column("step", sa.String(length=100), primary_key=True),
        sa.Column("workflow_qn", sa.String(length=200), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("event_type", sa.String(length=200), nullable=False),
        sa.Column("match_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column("event", _json(), nullable=True),
        sa.Column("matched_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_asanoha_workflow_waits_match",
        "asanoha_workflow_waits",
        ["event_type", "tenant_id", "match_key"],
    )


def downgrade() -> None:
    op.drop_index("ix_asanoha_workflow_waits_match", table_name="asanoha_workflow_waits")
    op.drop_table("asanoha_workflow_waits")
