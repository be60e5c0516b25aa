"""Aggregate snapshots: a state folded up to a stream version, personal values sealed.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_snapshots",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("aggregate", sa.String(length=200), nullable=False),
        sa.Column("stream_id", sa.String(length=64), nullable=False),
        sa.Column("stream_version", sa.Integer(), nullable=False),
        sa.Column("aggregate_version", sa.String(length=80), nullable=False),
        sa.Column(
            "position",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("state", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "aggregate", "stream_id", "stream_version"),
    )


def downgrade() -> None:
    op.drop_table("asanoha_snapshots")
