"""The first outcome of each idempotent write, under (tenant, principal, handler, key).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_idempotency",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("handler_qn", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("payload_digest", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column(
            "body",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "principal", "handler_qn", "key"),
    )
    op.create_index(
        "ix_asanoha_idempotency_expires", "asanoha_idempotency", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_asanoha_idempotency_expires", table_name="asanoha_idempotency")
    op.drop_table("asanoha_idempotency")
