"""Features' per-tenant configuration values, sealed secrets and switches.

Revision ID: 0026
Revises: 0023
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asanoha_feature_settings",
        sa.Column("tenant_id", sa.String(length=64), primary_key=True),
        sa.Column("feature", sa.String(length=100), primary_key=True),
        sa.Column("kind", sa.String(length=16), primary_key=True),
        sa.Column("key", sa.String(length=100), primary_key=True),
        sa.Column(
            "value", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("asanoha_feature_settings")
