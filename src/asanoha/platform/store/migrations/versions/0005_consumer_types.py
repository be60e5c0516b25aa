"""The event types each consumer follows, on its cursor row.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.add_column(sa.Column("types", _JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("asanoha_consumers") as batch:
        batch.drop_column("types")
