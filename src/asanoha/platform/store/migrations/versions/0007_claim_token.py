"""A claim token on the job row: a claim or an end of an attempt sent again after its reply
was lost recognises its own committed write.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.add_column(sa.Column("claim_token", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("asanoha_outbox") as batch:
        batch.drop_column("claim_token")
