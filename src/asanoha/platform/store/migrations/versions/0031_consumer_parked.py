"""Events a consumer parked for a tenant whose feature is switched off.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | Sequence[str] | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_consumer_parked",
        sa.Column("name", sa.String(length=200), primary_key=True),
        sa.Column(
            "event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True
        ),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("partition_key", sa.Integer(), nullable=False),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_asanoha_consumer_parked_tenant",
        "asanoha_consumer_parked",
        ["name", "tenant_id", "event_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_asanoha_consumer_parked_tenant", table_name="asanoha_consumer_parked")
    op.drop_table("asanoha_consumer_parked")
