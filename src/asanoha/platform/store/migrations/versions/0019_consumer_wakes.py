"""The pending wake-up of each consumer partition: a row while its task is pending or
running, so that writes arm at most one wake-up task per partition.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_consumer_wakes",
        sa.Column("name", sa.String(length=200), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("again", sa.Boolean(), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("asanoha_consumer_wakes")
